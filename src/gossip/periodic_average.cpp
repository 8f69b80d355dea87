#include "sgp/gossip/periodic_average.hpp"

#include <chrono>
#include <optional>
#include <utility>

#include "sgp/compute/backend.hpp"
#include "sgp/error.hpp"
#include "sgp/gossip/push_sum_engine.hpp"
#include "sgp/gossip/ring_allreduce.hpp"
#include "sgp/gossip/wire_format.hpp"
#include "sgp/topology/schedule.hpp"

namespace sgp::gossip {

bool exact_average_round(std::int64_t iteration, int every) {
  return every > 0 && (iteration + 1) % every == 0;
}

namespace {

// Whether a message belongs to the ring allreduce: its header frame says dtype 3. Anything else
// (other dtypes, damaged or short frames, control notices) goes to the gossip lane, whose engine
// checks and counts it as it always does.
bool ring_message(const transport::Message& m) {
  if (m.num_frames() == 0 || m.frame(0).size() < 8) return false;
  const auto h = m.frame(0);
  const auto dtype = static_cast<std::uint16_t>(std::to_integer<unsigned>(h[6]) |
                                                (std::to_integer<unsigned>(h[7]) << 8));
  return dtype == kDtypeRingFloat32;
}

}  // namespace

class LaneTransport::Lane final : public transport::Transport {
 public:
  Lane(LaneTransport& owner) : owner_(owner) {}

  int rank() const override { return owner_.inner_.rank(); }
  void send(int dest, std::span<const std::byte> header, std::span<const std::byte> payload,
            transport::ReleaseFn on_release) override {
    owner_.inner_.send(dest, header, payload, std::move(on_release));
  }
  std::optional<transport::Message> receive(std::chrono::milliseconds timeout) override {
    return owner_.receive(*this, timeout);
  }
  void wake() override { owner_.inner_.wake(); }
  void discard_pending(int dest) override { owner_.inner_.discard_pending(dest); }
  void release_peer(int peer) override { owner_.inner_.release_peer(peer); }

  std::deque<transport::Message> queued;  // arrived while the other lane was receiving

 private:
  LaneTransport& owner_;
};

LaneTransport::LaneTransport(transport::Transport& inner)
    : inner_(inner), ring_(std::make_unique<Lane>(*this)), gossip_(std::make_unique<Lane>(*this)) {}

LaneTransport::~LaneTransport() = default;

transport::Transport& LaneTransport::ring() { return *ring_; }
transport::Transport& LaneTransport::gossip() { return *gossip_; }

std::optional<transport::Message> LaneTransport::receive(Lane& lane,
                                                         std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  if (!lane.queued.empty()) {
    transport::Message next = std::move(lane.queued.front());
    lane.queued.pop_front();
    return next;
  }
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    auto message = inner_.receive(std::max(left, std::chrono::milliseconds(0)));
    if (!message) return std::nullopt;  // timed out or woken
    Lane& owner = ring_message(*message) ? *ring_ : *gossip_;
    if (&owner == &lane) return message;
    owner.queued.push_back(std::move(*message));
    if (Clock::now() >= deadline) return std::nullopt;
  }
}

PeriodicAverage::PeriodicAverage(compute::Backend& backend, const topology::Schedule& schedule,
                                 transport::Transport& transport, float* x, std::size_t n,
                                 const PushSumConfig& config)
    : backend_(backend), x_(x), n_(n), every_(config.global_average_every), lanes_(transport) {
  SGP_ENFORCE(every_ > 0 && config.mode == Mode::sync && config.gossip_every == 1,
              "periodic averaging needs sync rounds every iteration");
  gossip_ = std::make_unique<PushSumEngine>(backend, schedule, lanes_.gossip(), x, n, config);
  // The exact rounds stay float32 whatever --compress gossips with, so that they are exact.
  PushSumConfig ring_config = config;
  ring_config.compression = Compression::none;
  ring_ = std::make_unique<RingAllReduce>(backend, schedule.num_peers(), lanes_.ring(), x, n,
                                          ring_config);
}

// The ring's destructor waits for its buffers; the gossip engine's for its own.
PeriodicAverage::~PeriodicAverage() = default;

bool PeriodicAverage::step(std::int64_t iteration) {
  if (!exact_average_round(iteration, every_)) return gossip_->step(iteration);
  // The average is of z: x = x / w first (skipped when w is 1, so that H = 1 is allreduce's
  // arithmetic exactly); then every peer holds w = 1 and x = z = the average.
  if (gossip_->weight() != 1.0) {
    backend_.debias(x_, gossip_->weight(), x_, n_);
    gossip_->reset_weight_after_average();
  }
  ring_->mix();
  return true;
}

void PeriodicAverage::finish() {
  gossip_->finish();
  ring_->finish();
}

void PeriodicAverage::restore(std::int64_t round, double weight) {
  gossip_->restore(round - round / every_, weight);
  ring_->restore(round / every_, 1.0);
}

void PeriodicAverage::debias(float* z) { gossip_->debias(z); }
std::optional<double> PeriodicAverage::z_scale() const { return gossip_->z_scale(); }
const float* PeriodicAverage::trainable_z() const { return gossip_->trainable_z(); }
double PeriodicAverage::weight() const { return gossip_->weight(); }
std::int64_t PeriodicAverage::round() const { return gossip_->round() + ring_->round(); }

// Both engines' traffic and time together; rounds of either kind.
PushSumMetrics PeriodicAverage::metrics() const {
  PushSumMetrics m = gossip_->metrics();
  const PushSumMetrics ring = ring_->metrics();
  m.rounds += ring.rounds;
  m.messages_sent += ring.messages_sent;
  m.bytes_sent += ring.bytes_sent;
  m.messages_received += ring.messages_received;
  m.bytes_received += ring.bytes_received;
  m.send_seconds += ring.send_seconds;
  m.wait_seconds += ring.wait_seconds;
  m.apply_seconds += ring.apply_seconds;
  for (std::size_t i = 0; i < m.rejected.size(); ++i) m.rejected[i] += ring.rejected[i];
  return m;
}

}  // namespace sgp::gossip
