#include "sgp/gossip/ring_allreduce.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <tuple>

#include "in_flight.hpp"
#include "sgp/error.hpp"

namespace sgp::gossip {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// dst[i] += payload[i] (payload: float32 at any alignment).
void add_payload(float* dst, std::span<const std::byte> payload) {
  const std::size_t count = payload.size() / sizeof(float);
  for (std::size_t i = 0; i < count; ++i) {
    float v;
    std::memcpy(&v, payload.data() + i * sizeof(float), sizeof(float));
    dst[i] += v;
  }
}

}  // namespace

RingAllReduce::RingAllReduce(compute::Backend& backend, int num_peers,
                             transport::Transport& transport, float* x, std::size_t n,
                             PushSumConfig config)
    : backend_(backend),
      num_peers_(num_peers),
      transport_(transport),
      x_(x),
      n_(n),
      config_(config),
      rank_(transport.rank()),
      host_x_(backend.kind() == compute::DeviceKind::cpu),
      work_(x),
      per_chunk_(Chunking(n, config.chunk_elements).per_chunk),
      in_flight_(std::make_shared<InFlight>()) {
  SGP_ENFORCE(num_peers >= 1, "allreduce over {} peers", num_peers);
  SGP_ENFORCE(rank_ >= 0 && rank_ < num_peers, "transport rank {} is not a rank of {} peers", rank_,
              num_peers);
  SGP_ENFORCE(x != nullptr && n > 0, "the allreduce vector is empty");
  SGP_ENFORCE(config.gossip_every >= 1, "gossip_every must be >= 1, got {}", config.gossip_every);
  SGP_ENFORCE(config.timeout.count() > 0, "the allreduce timeout must be positive");
  SGP_ENFORCE(config.compression == Compression::none,
              "allreduce sends float32 (compression is refused up front)");
  if (!host_x_) {
    staging_host_ = static_cast<float*>(backend_.allocate_host(n_ * sizeof(float)));
    work_ = staging_host_;
  }
}

RingAllReduce::~RingAllReduce() {
  const auto deadline = Clock::now() + (failed_ ? std::chrono::milliseconds(0) : config_.timeout);
  const auto holders = in_flight_->release_all(transport_, rank_, deadline);
  if (!holders.empty()) {
    // Freeing memory the transport may still read would be worse than leaking it.
    spdlog::error("rank {}: allreduce chunks never released by the transport; leaking them", rank_);
    return;
  }
  if (staging_host_) backend_.deallocate_host(staging_host_);
}

std::size_t RingAllReduce::segment_begin(std::size_t n, int num_peers, int segment) {
  return static_cast<std::size_t>(static_cast<unsigned __int128>(n) *
                                  static_cast<unsigned>(segment) /
                                  static_cast<unsigned>(num_peers));
}

int RingAllReduce::segment_sent(int step) const {
  return ((rank_ - step) % num_peers_ + num_peers_) % num_peers_;
}

int RingAllReduce::segment_received(int step) const {
  return ((rank_ - 1 - step) % num_peers_ + num_peers_) % num_peers_;
}

Chunking RingAllReduce::segment_chunking(int segment) const {
  const auto size =
      segment_begin(n_, num_peers_, segment + 1) - segment_begin(n_, num_peers_, segment);
  return Chunking(size, per_chunk_);
}

std::optional<RingAllReduce::Position> RingAllReduce::first_position() const {
  for (int step = 0; step <= 2 * num_peers_ - 3; ++step) {
    if (segment_chunking(segment_received(step)).chunks() > 0) return Position{step, 0};
  }
  return std::nullopt;
}

std::optional<RingAllReduce::Position> RingAllReduce::next_position(Position p) const {
  if (p.chunk + 1 < segment_chunking(segment_received(p.step)).chunks()) {
    return Position{p.step, p.chunk + 1};
  }
  for (int step = p.step + 1; step <= 2 * num_peers_ - 3; ++step) {
    if (segment_chunking(segment_received(step)).chunks() > 0) return Position{step, 0};
  }
  return std::nullopt;
}

bool RingAllReduce::step(std::int64_t iteration) {
  if ((iteration + 1) % config_.gossip_every != 0) return false;
  mix();
  return true;
}

void RingAllReduce::send_chunk(int step, std::uint32_t chunk) {
  const auto start = Clock::now();
  const int segment = segment_sent(step);
  const Chunking chunking = segment_chunking(segment);
  WireHeader h;
  h.dtype = kDtypeRingFloat32;
  h.sender = rank_;
  h.chunk = chunk;
  h.round = round_;
  h.weight = 1.0;
  h.step = static_cast<std::uint64_t>(step);
  h.total = n_;
  h.offset = segment_begin(n_, num_peers_, segment) + chunking.offset(chunk);
  h.count = chunking.size(chunk);
  const float* src = work_ + h.offset;
  const std::span<const std::byte> payload(reinterpret_cast<const std::byte*>(src),
                                           h.count * sizeof(float));
  h.payload_hash = payload_hash(payload);
  const int next = (rank_ + 1) % num_peers_;
  try {
    transport_.send(next, encode_header(h), payload, in_flight_->hold(src, next));
  } catch (const IoError&) {
    failed_ = true;
    throw;
  }
  std::lock_guard lock(metrics_mutex_);
  metrics_.messages_sent += 1;
  metrics_.bytes_sent += kHeaderBytes + payload.size();
  metrics_.send_seconds += seconds_since(start);
}

void RingAllReduce::mix() {
  SGP_ENFORCE(!failed_, "allreduce used after it failed");
  if (!host_x_) {
    backend_.download_async(work_, x_, n_ * sizeof(float));
    backend_.wait_transfers();
  }
  if (num_peers_ > 1) {
    const auto own = segment_chunking(segment_sent(0));
    for (std::uint32_t c = 0; c < own.chunks(); ++c) send_chunk(0, c);
    for (auto p = first_position(); p; p = next_position(*p)) {
      const DecodedMessage m = receive_expected(*p);
      apply(m, p->step);
      if (p->step + 1 <= 2 * num_peers_ - 3) send_chunk(p->step + 1, p->chunk);
    }
    // The caller modifies x next (the SGD step): nothing of it may still be on its way out.
    wait_released(nullptr);
  }
  if (!host_x_) {
    backend_.upload_async(x_, work_, n_ * sizeof(float));
    backend_.wait_transfers();
  }
  ++round_;
  std::lock_guard lock(metrics_mutex_);
  metrics_.rounds = round_;
}

DecodedMessage RingAllReduce::receive_expected(Position expected) {
  const int previous = (rank_ - 1 + num_peers_) % num_peers_;
  const auto deadline = Clock::now() + config_.timeout;
  for (auto now = Clock::now(); now < deadline; now = Clock::now()) {
    auto message = transport_.receive(std::chrono::ceil<std::chrono::milliseconds>(deadline - now));
    {
      std::lock_guard lock(metrics_mutex_);
      metrics_.wait_seconds += seconds_since(now);
    }
    if (!message) continue;
    const auto start = Clock::now();
    auto decoded = decode(std::move(*message), expected);
    std::lock_guard lock(metrics_mutex_);
    metrics_.apply_seconds += seconds_since(start);
    if (decoded) return std::move(*decoded);
  }
  failed_ = true;
  std::uint64_t rejected = 0;
  {
    std::lock_guard lock(metrics_mutex_);
    rejected = metrics_.rejected_total();
  }
  throw IoError(fmt::format(
      "rank {}: no allreduce message from rank {} for round {} (step {}, chunk {}) within {} ms "
      "({})",
      rank_, previous, round_, expected.step, expected.chunk, config_.timeout.count(),
      rejected ? fmt::format("none that could be accepted; {} rejected", rejected)
               : std::string("peer not started, dead or too slow")));
}

// Every field checked against the one message that may come next from rank - 1.
std::optional<DecodedMessage> RingAllReduce::decode(transport::Message message, Position expected) {
  auto frames = decode_frames(message, kDtypeRingFloat32);
  if (auto* cause = std::get_if<RejectCause>(&frames)) {
    reject(*cause,
           fmt::format("{} frame(s), {} bytes", message.num_frames(), message.total_bytes()));
    return std::nullopt;
  }
  const WireHeader h = std::get<WireHeader>(frames);
  const auto payload = message.frame(1);
  const std::string what = fmt::format("from rank {} for round {} (step {}, chunk {})", h.sender,
                                       h.round, h.step, h.chunk);
  const int previous = (rank_ - 1 + num_peers_) % num_peers_;
  if (h.sender != previous) {
    reject(RejectCause::unexpected_sender,
           fmt::format("{}: only rank {} sends to rank {} on the ring", what, previous, rank_));
    return std::nullopt;
  }
  if (const auto rank = message.authenticated_rank(); rank && *rank != h.sender) {
    reject(RejectCause::sender_mismatch, fmt::format("{}: authenticated as rank {}", what, *rank));
    return std::nullopt;
  }
  if (h.weight != 1.0) {
    reject(RejectCause::bad_weight, fmt::format("{}: weight {} (must be 1)", what, h.weight));
    return std::nullopt;
  }
  const auto got = std::make_tuple(h.round, h.step, h.chunk);
  const auto want =
      std::make_tuple(round_, static_cast<std::uint64_t>(expected.step), expected.chunk);
  if (got != want) {
    reject(got < want ? RejectCause::stale_round : RejectCause::future_round,
           fmt::format("{}: expected round {} step {} chunk {}", what, round_, expected.step,
                       expected.chunk));
    return std::nullopt;
  }
  const int segment = segment_received(expected.step);
  const Chunking chunking = segment_chunking(segment);
  if (h.total != n_ ||
      h.offset != segment_begin(n_, num_peers_, segment) + chunking.offset(h.chunk) ||
      h.count != chunking.size(h.chunk) || payload.size() != h.count * sizeof(float)) {
    reject(RejectCause::bad_size, fmt::format("{}: {} elements at {} of {}, {} bytes", what,
                                              h.count, h.offset, h.total, payload.size()));
    return std::nullopt;
  }
  if (payload_hash(payload) != h.payload_hash) {
    reject(RejectCause::payload_checksum, what);
    return std::nullopt;
  }
  if (!all_finite(payload, kDtypeFloat32)) {
    reject(
        RejectCause::non_finite,
        fmt::format("{}: NaN or infinite values (rank {} diverged or is faulty)", what, h.sender));
    return std::nullopt;
  }
  return DecodedMessage{h, payload, std::move(message)};
}

void RingAllReduce::apply(const DecodedMessage& m, int step) {
  float* dst = work_ + m.header.offset;
  const auto count = m.header.count;
  if (step >= num_peers_ - 1) {
    wait_released(dst);  // this chunk of x went out at an earlier step
  }
  const auto start = Clock::now();
  if (step < num_peers_ - 1) {
    add_payload(dst, m.payload);
    if (step == num_peers_ - 2) {  // this rank owns the segment: its complete sum
      const auto peers = static_cast<float>(num_peers_);
      for (std::size_t i = 0; i < count; ++i) dst[i] /= peers;
    }
  } else {
    std::memcpy(dst, m.payload.data(), m.payload.size());  // the owner's average
  }
  std::lock_guard lock(metrics_mutex_);
  metrics_.messages_received += 1;
  metrics_.bytes_received += kHeaderBytes + m.payload.size();
  metrics_.apply_seconds += seconds_since(start);
}

void RingAllReduce::wait_released(const void* chunk) {
  const auto start = Clock::now();
  const auto holders = in_flight_->wait(chunk, start + config_.timeout);
  {
    std::lock_guard lock(metrics_mutex_);
    metrics_.wait_seconds += seconds_since(start);
  }
  if (!holders.empty()) {
    failed_ = true;
    throw IoError(fmt::format(
        "rank {}: allreduce round {}: messages to rank {} not delivered within {} ms (peer not "
        "started, dead or not reading)",
        rank_, round_, holders.front(), config_.timeout.count()));
  }
}

void RingAllReduce::reject(RejectCause cause, const std::string& detail) {
  bool first = false;
  {
    std::lock_guard lock(metrics_mutex_);
    ++metrics_.rejected[static_cast<std::size_t>(cause)];
    first = !logged_reject_;
    logged_reject_ = true;
  }
  if (first) {
    spdlog::warn("rank {}: rejected an allreduce message ({}): {}; further ones are only counted",
                 rank_, reject_cause_name(cause), detail);
  }
}

void RingAllReduce::finish() { wait_released(nullptr); }

void RingAllReduce::restore(std::int64_t round, double weight) {
  SGP_ENFORCE(round_ == 0, "restore() after {} rounds", round_);
  SGP_ENFORCE(round >= 0, "cannot restore round {}", round);
  SGP_ENFORCE(weight == 1.0, "allreduce keeps the weight at 1, not {}", weight);
  round_ = round;
  std::lock_guard lock(metrics_mutex_);
  metrics_.rounds = round_;
}

void RingAllReduce::debias(float* z) { backend_.copy(z, x_, n_ * sizeof(float)); }

PushSumMetrics RingAllReduce::metrics() const {
  std::lock_guard lock(metrics_mutex_);
  return metrics_;
}

}  // namespace sgp::gossip
