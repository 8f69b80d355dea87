#include "gossip_session.hpp"

#include <cstdlib>
#include <mutex>
#include <span>
#include <string>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "sgp/compute/device.hpp"
#include "sgp/compute/device_buffer.hpp"
#include "sgp/config/algorithm.hpp"
#include "sgp/config/engine_settings.hpp"
#include "sgp/config/settings.hpp"
#include "sgp/error.hpp"
#include "sgp/gossip/mixer.hpp"
#include "sgp/gossip/snapshot_publisher.hpp"
#include "sgp/gossip/zmq_peer.hpp"
#include "sgp/peer/peer_runner.hpp"
#include "sgp/peer/trainer.hpp"
#include "sgp/run/run_config.hpp"
#include "sgp/topology/schedule.hpp"
#include "sgp/transport/faulty_transport.hpp"

namespace sgp::bridge {

namespace {

// $NAME, or nothing when it is unset or empty.
std::optional<std::string> environment(const char* name) {
  const char* value = std::getenv(name);
  if (!value || !*value) return std::nullopt;
  return std::string(value);
}

// Holds `mutex` for one call. The engine is for one thread at a time: a second thread gets
// InputError instead of a race.
std::unique_lock<std::mutex> one_caller(std::mutex& mutex, std::string_view call) {
  std::unique_lock lock(mutex, std::try_to_lock);
  if (!lock) {
    throw InputError(fmt::format(
        "{}: another thread is inside a call of this peer's gossip; use it from one thread at a "
        "time",
        call));
  }
  return lock;
}

std::string describe(const BufferPlace& place) {
  if (place.kind == compute::DeviceKind::cpu) return "host memory";
  return fmt::format("cuda:{}", place.device_index);
}

}  // namespace

SessionStart session_start_from_environment() {
  SessionStart start;
  if (const auto file = environment("SGP_CONFIG")) {
    start.config = run::read_run_config(*file).settings;
  }
  if (const auto topology = environment("SGP_TOPOLOGY")) start.config.topology = *topology;
  if (start.config.topology.empty()) {
    throw InputError(
        "$SGP_TOPOLOGY: not set (nor a topology in the config.json $SGP_CONFIG names): start the "
        "program with `sgp launch --topology FILE -- COMMAND`, or set it to the topology file");
  }
  if (const auto dir = environment("SGP_RUN_DIR")) start.config.run_dir = *dir;
  if (const auto monitor = environment("SGP_MONITOR")) start.config.monitor = *monitor;
  if (const auto keys = environment("SGP_KEYS")) start.config.keys_dir = *keys;
  if (const auto credentials = environment("SGP_RUN_CREDENTIALS")) {
    start.config.run_credentials = *credentials;
  }
  start.rank = peer::resolve_rank(std::nullopt);
  return start;
}

struct GossipSession::State {
  topology::Schedule mixing;
  peer::PeerTransport transport;
  std::unique_ptr<gossip::SnapshotPublisher> publisher;
  // Made by the first buffer's place: the backend, the engine's x there, the engine.
  std::optional<BufferPlace> place;
  std::unique_ptr<compute::Backend> backend;
  compute::DeviceBuffer<float> x;  // the engine's x, unless the caller attached its buffer
  float* engine_x = nullptr;       // x.data() or the attached buffer
  std::size_t numel = 0;
  std::unique_ptr<gossip::Mixer> engine;
  std::vector<float> host_z;  // publish() from a GPU
  // After finish(), which releases the engine: what it ended with.
  gossip::PushSumMetrics final_metrics;
  double final_weight = 1.0;
  std::vector<int> final_excluded;

  State(topology::Schedule schedule, std::size_t n) : mixing(std::move(schedule)), numel(n) {}

  // The engine's x from the caller's z: x = w z, except for asgp, whose x is z (it scales what
  // changed since its last round itself).
  void take_z(const float* z) {
    if (z != engine_x) backend->copy(engine_x, z, numel * sizeof(float));
    const double w = engine->weight();
    if (engine->z_scale() && w != 1.0) backend->scale(engine_x, numel, static_cast<float>(w));
  }
  // asgp: the ranks excluded as failed, in order; what the engine ended with once it is gone.
  std::vector<int> excluded() const {
    const gossip::MembershipControl* group = engine ? engine->membership_control() : nullptr;
    if (!group) return final_excluded;
    std::vector<int> out;
    for (const auto& e : group->events())
      if (e.what == "excluded") out.push_back(e.rank);
    return out;
  }
  // z = x / w back to the caller: nothing to do for an attached buffer while w is 1.
  void give_z(float* z) {
    if (z != engine_x || !engine->z_scale() || engine->weight() != 1.0) engine->debias(z);
    backend->synchronize();
  }
};

GossipSession::GossipSession(config::TrainConfig config, int rank, std::size_t numel)
    : config_(std::move(config)), rank_(rank), numel_(numel) {
  config::validate(config_);
  // The update rules of issue 35 are the trainer's (update_rule.hpp); a session only mixes.
  if (config::info(config_.algo).tracks_gradient ||
      config_.momentum_kind != config::MomentumKind::local || config_.slow_momentum > 0.0) {
    throw InputError(
        "--algo gt, --momentum-kind quasi-global and --slow-momentum change sgp's own training "
        "step; a gossip session only mixes the caller's buffer (--global-average-every "
        "applies): docs/optimizers.md");
  }
  if (numel_ == 0) throw InputError("numel: the buffer to mix must hold at least one element");
  const topology::Schedule file_schedule = peer::load_topology(config_);
  peer::check_rank(config_, file_schedule, rank_);
  state_ = std::make_unique<State>(peer::peer_mixing_schedule(config_, file_schedule), numel_);
  const gossip::Security secure = config::security(config_);  // reads the run's credentials once
  if (communicates()) {
    state_->transport = peer::open_peer_transport(config_, state_->mixing, rank_, numel_, secure);
  }
  if (!config_.monitor.empty()) {
    state_->publisher = std::make_unique<gossip::SnapshotPublisher>(
        config_.monitor, rank_, gossip::snapshot_curve(state_->mixing, rank_, secure),
        gossip::snapshot_plain(rank_, secure));
  }
}

GossipSession::~GossipSession() = default;

int GossipSession::world_size() const { return state_->mixing.num_peers(); }

bool GossipSession::communicates() const {
  return info(config_.algo).communicates && world_size() > 1;
}

void GossipSession::start_engine(const float* z, const BufferPlace& place, float* attached) {
  State& s = *state_;
  if (s.place) {
    if (*s.place != place) {
      throw InputError(fmt::format(
          "the buffer is in {}, but this peer's earlier buffers were in {}: keep the parameters "
          "on one device",
          describe(place), describe(*s.place)));
    }
    return;
  }
  if (place.kind == compute::DeviceKind::cuda && !compute::cuda_compiled()) {
    throw InputError(
        "the buffer is a CUDA tensor, but this sgp was built without CUDA: move the parameters "
        "to the CPU, or build sgp with nvcc (-Dcuda=enabled)");
  }
  const std::string device = place.kind == compute::DeviceKind::cpu
                                 ? std::string("cpu")
                                 : fmt::format("cuda:{}", place.device_index);
  const gossip::PushSumConfig engine_config = config::push_sum_config(
      config_, rank_, place.kind, config::overlap_comm_thread(config_, s.mixing, rank_));
  s.x = {};  // what an earlier, failed try made, before its backend goes
  try {
    s.backend = compute::make_backend({device, config_.blas_threads, config_.tf32, 0});
  } catch (const InputError& e) {
    throw InputError(
        fmt::format("the buffer is in {}, which sgp cannot use: {}", describe(place), e.what()));
  }
  if (communicates()) {
    if (!attached) {
      // The engines take x as the caller's parameters when they start (asgp keeps it as the z
      // it last saw and adds only later changes): fresh memory there was mass out of nothing.
      s.x = compute::DeviceBuffer<float>(*s.backend, numel_);
      s.backend->copy(s.x.data(), z, numel_ * sizeof(float));
    }
    s.engine_x = attached ? attached : s.x.data();
    s.engine = gossip::make_mixer(*s.backend, s.mixing, *s.transport.active(), s.engine_x, numel_,
                                  engine_config);
  }
  s.place = place;  // last: a buffer refused above leaves the next one to try again
}

void GossipSession::attach(float* z, const BufferPlace& place) {
  const auto lock = one_caller(busy_, "attach");
  if (finished_) throw InputError("attach: this peer's gossip was closed");
  if (state_->place) {
    throw InputError("attach: only before the first step (the engine already has its buffer)");
  }
  start_engine(z, place, z);
  attached_ = z;
}

bool GossipSession::step(float* z, const BufferPlace& place) {
  const auto lock = one_caller(busy_, "step");
  if (finished_) throw InputError("step: this peer's gossip was closed");
  if (failed_) {
    throw InputError("step: this peer's gossip failed (the PeerError before); close it");
  }
  if (attached_ && z != attached_) {
    throw InputError(
        "step: this peer mixes the buffer given to attach(), in place: pass that one (its memory "
        "must stay where it was)");
  }
  start_engine(z, place);
  const std::int64_t iteration = iteration_++;
  State& s = *state_;
  if (!s.engine || (iteration + 1) % config_.gossip_every != 0) return false;
  s.take_z(z);
  try {
    const bool mixed = s.engine->step(iteration);
    s.give_z(z);
    return mixed;
  } catch (const IoError&) {
    failed_ = true;  // the engine may only be destroyed now
    throw;
  }
}

bool GossipSession::publish(const float* z, const BufferPlace& place, std::int64_t iteration) {
  const auto lock = one_caller(busy_, "publish");
  State& s = *state_;
  if (!s.publisher) return false;
  start_engine(z, place);
  std::span<const float> host(z, numel_);
  if (place.kind != compute::DeviceKind::cpu) {
    s.host_z.resize(numel_);
    s.backend->download(s.host_z.data(), z, numel_ * sizeof(float));
    host = s.host_z;
  }
  const bool queued =
      s.publisher->publish(iteration, host, s.engine ? s.engine->weight() : s.final_weight);
  if (!queued) spdlog::debug("monitor not reachable: snapshot of iteration {} dropped", iteration);
  return queued;
}

void GossipSession::pause() {
  const auto lock = one_caller(busy_, "pause");
  if (state_->engine && !failed_) state_->engine->begin_pause();
}

void GossipSession::resume() {
  const auto lock = one_caller(busy_, "resume");
  if (state_->engine && !failed_) state_->engine->end_pause();
}

void GossipSession::stay_heard() {
  const auto lock = one_caller(busy_, "stay_heard");
  if (state_->engine && !failed_) state_->engine->stay_heard();
}

void GossipSession::finish(float* z, const std::optional<BufferPlace>& place) {
  const auto lock = one_caller(busy_, "close");
  if (finished_) return;
  State& s = *state_;
  if (!z) z = attached_;  // it holds z between steps, not the engine's x
  if (z && place) start_engine(z, *place);
  finished_ = true;
  if (s.engine && !failed_) {
    // The caller's latest z counts (asgp takes what changed since its last round).
    if (z) s.take_z(z);
    s.engine->finish();
    if (z) s.give_z(z);
    // What the accessors report from now on: the engine goes with the sockets.
    s.final_metrics = s.engine->metrics();
    s.final_weight = s.engine->weight();
    s.final_excluded = s.excluded();
  }
  s.engine.reset();
  s.transport = peer::PeerTransport();  // the endpoint is free again
}

double GossipSession::weight() const {
  const auto lock = one_caller(busy_, "weight");
  return state_->engine ? state_->engine->weight() : state_->final_weight;
}

gossip::PushSumMetrics GossipSession::metrics() const {
  const auto lock = one_caller(busy_, "metrics");
  return state_->engine ? state_->engine->metrics() : state_->final_metrics;
}

std::vector<int> GossipSession::excluded_peers() const {
  const auto lock = one_caller(busy_, "excluded_peers");
  return state_->excluded();
}

std::uint64_t GossipSession::dropped_snapshots() const {
  return state_->publisher ? state_->publisher->dropped() : 0;
}

}  // namespace sgp::bridge
