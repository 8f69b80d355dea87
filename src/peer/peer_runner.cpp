#include "sgp/peer/peer_runner.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "sgp/compress/compressor.hpp"
#include "sgp/compute/device.hpp"
#include "sgp/config/algorithm.hpp"
#include "sgp/config/engine_settings.hpp"
#include "sgp/config/settings.hpp"
#include "sgp/data/dataset.hpp"
#include "sgp/endpoint.hpp"
#include "sgp/error.hpp"
#include "sgp/gossip/control_message.hpp"
#include "sgp/gossip/push_sum_config.hpp"
#include "sgp/gossip/run_credentials.hpp"
#include "sgp/gossip/snapshot_publisher.hpp"
#include "sgp/gossip/zmq_peer.hpp"
#include "sgp/model/evaluator.hpp"
#include "sgp/model/mlp.hpp"
#include "sgp/model/model_spec.hpp"
#include "sgp/optim/update_rule.hpp"
#include "sgp/peer/batch_loader.hpp"
#include "sgp/peer/resume_settings.hpp"
#include "sgp/peer/trainer.hpp"
#include "sgp/run/file_names.hpp"
#include "sgp/run/run_config.hpp"
#include "sgp/run/run_directory.hpp"
#include "sgp/run/run_files.hpp"
#include "sgp/topology/analysis.hpp"
#include "sgp/topology/dot_file.hpp"
#include "sgp/topology/generator.hpp"
#include "sgp/topology/schedule.hpp"
#include "sgp/transport/faulty_transport.hpp"
#include "sgp/transport/handed_listener.hpp"
#include "sgp/transport/zmq_transport.hpp"

namespace sgp::peer {

namespace {

// $NAME as a non-negative integer, or nothing when it is unset or empty; InputError naming it
// when it is something else.
std::optional<int> environment_index(const char* name, const char* what) {
  const char* value = std::getenv(name);
  if (!value || !*value) return std::nullopt;
  int index = -1;
  const char* end = value + std::strlen(value);
  const auto [ptr, ec] = std::from_chars(value, end, index);
  if (ec != std::errc() || ptr != end || index < 0) {
    throw InputError(fmt::format("${}: '{}' is not {}", name, value, what));
  }
  return index;
}

}  // namespace

int resolve_rank(std::optional<int> flag) {
  if (flag) return *flag;
  for (const char* name : {"RANK", "SLURM_PROCID"}) {
    if (const auto rank = environment_index(name, "a rank")) return *rank;
  }
  throw InputError("no rank: give --rank, or set RANK or SLURM_PROCID");
}

int local_peer_index(const topology::Schedule& schedule, int rank) {
  if (const auto index = environment_index("LOCAL_RANK", "a local rank")) return *index;
  const auto host = [&](int r) {
    return Endpoint::parse(schedule.endpoint(r), "the topology").host;
  };
  int lower = 0;
  for (int r = 0; r < rank; ++r)
    if (host(r) == host(rank)) ++lower;
  return lower;
}

namespace {
std::atomic<bool> g_leave_requested{false};
extern "C" void request_leave(int) { g_leave_requested.store(true); }
}  // namespace

std::string rejoining_credentials(const config::TrainConfig& config, int rank) {
  if (config.run_dir.empty()) return "";
  const auto share = gossip::run_credentials_file(config.run_dir, rank);
  return std::filesystem::exists(share) ? share.string() : "";
}

topology::Schedule load_topology(const config::TrainConfig& config) {
  if (config.topology.empty()) throw InputError("--topology: a topology file is required");
  topology::DotReadOptions options;
  options.require_endpoints = true;
  auto schedule = topology::read_dot_file(config.topology, options);
  topology::require_strongly_connected(schedule, config.topology);
  return schedule;
}

void check_rank(const config::TrainConfig& config, const topology::Schedule& file_schedule,
                int rank) {
  const int n = file_schedule.num_peers();
  if (rank < 0 || rank >= n) {
    throw InputError(fmt::format("--rank {}: {} has ranks 0..{}", rank, config.topology, n - 1));
  }
  // torchrun and Slurm set WORLD_SIZE: a topology of another size is the wrong file.
  if (const char* world = std::getenv("WORLD_SIZE"); world && *world) {
    if (std::string(world) != std::to_string(n)) {
      throw InputError(
          fmt::format("$WORLD_SIZE is {}, but {} has {} peers", world, config.topology, n));
    }
  }
}

topology::Schedule peer_mixing_schedule(const config::TrainConfig& config,
                                        const topology::Schedule& file_schedule) {
  const std::optional<double> self_weight =
      config.self_weight > 0.0 ? std::optional<double>(config.self_weight) : std::nullopt;
  return config::mixing_schedule(config.algo, file_schedule, self_weight, config.topology);
}

namespace {

// Each outgoing edge's shared-memory ring: two rounds of `mixed` float32 values (a receiver
// holds a round while the next comes in), at least 1 MiB and at most 64 MiB (what does not fit
// goes over ZeroMQ).
std::size_t local_ring_bytes(std::size_t mixed) {
  constexpr std::size_t kMin = std::size_t{1} << 20, kMax = std::size_t{64} << 20;
  return std::clamp(2 * mixed * sizeof(float) + 4096, kMin, kMax);
}

}  // namespace

PeerTransport open_peer_transport(const config::TrainConfig& config,
                                  const topology::Schedule& mixing, int rank,
                                  std::size_t parameters, const gossip::Security& secure) {
  return open_peer_transport(config, mixing, rank, parameters, secure,
                             config::info(config.algo).mode);
}

PeerTransport open_peer_transport(const config::TrainConfig& config,
                                  const topology::Schedule& mixing, int rank,
                                  std::size_t parameters, const gossip::Security& secure,
                                  gossip::Mode mode) {
  transport::ZmqOptions zmq;
  zmq.send_timeout = std::chrono::milliseconds(config.timeout_ms);
  zmq.local_ipc = config.local_ipc;
  zmq.listen_fd = transport::take_handed_listener(mixing.endpoint(rank)).value_or(-1);
  PeerTransport out;
  // gt mixes [x; y]: twice the parameters per round.
  const std::size_t mixed = optim::state_layout(config, parameters).mixed;
  std::uint64_t chunk = gossip::PushSumConfig{}.chunk_elements;
  if (const auto& c = config.compress.compressor) {
    // A compressed difference is one frame (compressed_push_sum.hpp): admit the largest.
    chunk = std::max<std::uint64_t>(chunk, (compress::max_payload_bytes(*c, mixed) + 3) / 4);
  }
  out.zmq = gossip::open_zmq_transport(mixing, rank, gossip::Chunking(mixed, chunk), secure, zmq,
                                       mode, config.global_average_every > 0);
  if (config.local_fast_path) {
    out.shm = std::make_unique<transport::ShmTransport>(
        *out.zmq, transport::ShmOptions{.ring_bytes = local_ring_bytes(mixed)});
  }
  if (const auto faults = transport::parse_fault_spec(config.inject); faults.any()) {
    out.faulty = std::make_unique<transport::FaultyTransport>(*out.active(), faults,
                                                              gossip::is_control_header);
    spdlog::info("injecting faults: {}", transport::format_fault_spec(faults));
  }
  spdlog::info("bound {}; pushing to ranks {}", out.zmq->endpoint(),
               fmt::join(mixing.all_out_neighbors(rank), ", "));
  return out;
}

PeerTransport::PeerTransport() = default;
PeerTransport::PeerTransport(PeerTransport&&) noexcept = default;
PeerTransport& PeerTransport::operator=(PeerTransport&&) noexcept = default;
PeerTransport::~PeerTransport() = default;

transport::Transport* PeerTransport::active() const {
  if (faulty) return faulty.get();
  if (shm) return shm.get();
  return zmq.get();
}

transport::ShmStats PeerTransport::shm_stats() const {
  return shm ? shm->stats() : transport::ShmStats{};
}

void PeerTransport::add_traffic(run::PeerSummary& summary) const {
  if (!zmq) return;
  const transport::ShmStats shm = shm_stats();
  summary.shm_bytes = shm.shm_bytes;
  summary.zmq_bytes = zmq->bytes_sent();
  summary.shm_inline_messages = shm.inline_messages;
  summary.shm_refused = shm.refused_total();
}

run::PeerSummary run_peer(const config::TrainConfig& config, int rank, bool write_config,
                          bool join) {
  config::validate(config);
  if (join && !info(config.algo).joins) {
    throw InputError(fmt::format("--join: only asgp peers can join a run in progress, not {}",
                                 name_of(config.algo)));
  }
  const topology::Schedule file_schedule = load_topology(config);
  check_rank(config, file_schedule, rank);
  const topology::Schedule schedule = peer_mixing_schedule(config, file_schedule);
  const int n = file_schedule.num_peers();

  auto backend = compute::make_backend(
      {config.device, config.blas_threads, config.tf32, local_peer_index(file_schedule, rank)});
  const auto data_dir = data::resolve_data_dir(config.data_dir);
  const auto [train, test] = load_peer_data(config, rank, n, data_dir);

  run::RunDirectory run(config.run_dir.empty() ? run::create_default_run_dir("peer")
                                               : std::filesystem::path(config.run_dir),
                        rank);
  if (config.resume && run::ranks_finished(run.path(), {rank}) &&
      !extends_finished_run(run.path(), {rank}, config)) {
    spdlog::info("--resume: rank {} of the run in {} is finished; nothing to do", rank,
                 run.path().string());
    return run::read_json_file(run.path() / run::peer_summary_file(rank))->get<run::PeerSummary>();
  }
  // A peer joining a run in progress (asgp) continues that run's files, as a resume does.
  run.claim({join ? run::RunStart::resume : run::run_start_of(config), {rank}});
  // Where the rank's previous process stopped, before this one's records follow its own.
  const auto failed_after =
      join ? run::last_logged_iteration(run.path() / fmt::format("peer-{}.jsonl", rank))
           : std::nullopt;
  if (rank == 0 && write_config) run::write_run_config(run, config, "peer", n);

  const gossip::Security secure = config::security(config);  // reads the run's credentials once
  PeerTransport transport;
  Communication comm;
  comm.join = join;
  if (info(config.algo).communicates && n > 1) {
    // Frames are capped at what this model's push-sum messages need (ZMQ_MAXMSGSIZE).
    const std::size_t parameters = model::parameter_count(
        model::parse_model_spec(config.model), model::input_shape(train), train.num_classes);
    transport = open_peer_transport(config, schedule, rank, parameters, secure);
    comm.schedule = &schedule;
    comm.transport = transport.active();
    if (config.leave_on_term) {
      std::signal(SIGTERM, request_leave);
      comm.leave_requested = &g_leave_requested;
    }
  }
  std::unique_ptr<gossip::SnapshotPublisher> publisher;
  if (!config.monitor.empty()) {
    publisher = std::make_unique<gossip::SnapshotPublisher>(
        config.monitor, rank, gossip::snapshot_curve(schedule, rank, secure),
        gossip::snapshot_plain(rank, secure));
    comm.snapshot = [&publisher](std::int64_t iteration, bool last, const std::vector<float>& z,
                                 double w) {
      if (!publisher->publish(iteration, z, w, last)) {
        spdlog::debug("monitor not reachable: snapshot of iteration {} dropped", iteration);
      }
    };
  }
  Trainer trainer(config, rank, n, *backend, train, test, run, comm);
  run::PeerSummary summary = trainer.run();
  run::write_model_file(run.path() / run::peer_model_file(rank), trainer.trained_model());
  if (publisher) summary.dropped_snapshots = publisher->dropped();
  summary.failed_after_iteration = failed_after;
  transport.add_traffic(summary);
  run.write_json(run::peer_summary_file(rank), summary);
  return summary;
}

}  // namespace sgp::peer
