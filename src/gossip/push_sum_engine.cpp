#include "sgp/gossip/push_sum_engine.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "in_flight.hpp"
#include "round_tracker.hpp"
#include "sgp/error.hpp"
#include "sgp/gossip/half_float.hpp"
#include "sgp/gossip/neighbour_watch.hpp"
#include "sgp/gossip/push_sum_arithmetic.hpp"

namespace sgp::gossip {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// "rank 2" or "ranks 2, 5" (each rank once).
std::string ranks_text(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return fmt::format("rank{} {}", ranks.size() == 1 ? "" : "s", fmt::join(ranks, ", "));
}

}  // namespace

PushSumEngine::PushSumEngine(compute::Backend& backend, topology::Schedule schedule,
                             transport::Transport& transport, float* x, std::size_t n,
                             PushSumConfig config)
    : backend_(backend),
      schedule_(std::move(schedule)),
      transport_(transport),
      x_(x),
      n_(n),
      config_(config),
      rank_(transport.rank()),
      host_x_(backend.kind() == compute::DeviceKind::cpu),
      chunking_(n, config.chunk_elements),
      in_flight_(std::make_shared<InFlight>()),
      dtype_(wire_dtype(config.compression)),
      element_bytes_(element_bytes(dtype_)) {
  SGP_ENFORCE(rank_ >= 0 && rank_ < schedule_.num_peers(),
              "transport rank {} is not a rank of the {}-peer schedule", rank_,
              schedule_.num_peers());
  SGP_ENFORCE(x != nullptr && n > 0, "the push-sum vector is empty");
  SGP_ENFORCE(config.tau >= 0, "tau must be >= 0, got {}", config.tau);
  SGP_ENFORCE(config.gossip_every >= 1, "gossip_every must be >= 1, got {}", config.gossip_every);
  SGP_ENFORCE(config.timeout.count() > 0, "the gossip timeout must be positive");
  SGP_ENFORCE(config.max_rounds_ahead >= 0, "max_rounds_ahead must be >= 0");
  SGP_ENFORCE(config.compression == Compression::none || host_x_,
              "compressed gossip needs x in host memory (refused up front for other devices)");
  SGP_ENFORCE(config.mode == Mode::sync || config.mode == Mode::overlap,
              "PushSumEngine mixes in sync or overlap mode, not {}", name_of(config.mode));
  check_tau(schedule_, rank_, config);
  const auto tau_rounds = static_cast<std::uint64_t>(config.mode == Mode::overlap ? config.tau : 0);
  max_held_bytes_ = std::max<std::uint64_t>(
      config.max_held_bytes, (tau_rounds + 2) * schedule_.all_in_neighbors(rank_).size() *
                                 static_cast<std::uint64_t>(n) * sizeof(float));
  tracker_ = std::make_unique<RoundTracker>(schedule_, rank_, rounds_ahead_bound(schedule_, config),
                                            chunking_.chunks());
  if (!host_x_) scratch_device_ = static_cast<float*>(backend_.allocate(n_ * sizeof(float)));
  const bool measurable =
      config.mode == Mode::sync && host_x_ && config.compression == Compression::none;
  if (measurable) watch_ = std::make_unique<NeighbourWatch>(rank_, config.robust);
  SGP_ENFORCE((config.robust == Robust::none && !config.sign_flip) || measurable,
              "--robust clip and the sign-flip attack need sync mode, x in host memory and float32 "
              "payloads (refused up front)");
  check_robust(schedule_, rank_, config.robust);
  if (threaded()) comm_thread_ = std::thread([this] { comm_loop(); });
}

PushSumEngine::~PushSumEngine() {
  if (comm_thread_.joinable()) {
    {
      std::lock_guard lock(comm_mutex_);
      stop_ = true;
    }
    transport_.wake();
    comm_thread_.join();
  }
  // Jobs never sent (the communication thread failed): their buffers are not in the transport.
  for (auto& job : send_queue_) {
    for (auto& release : job.releases) release();
  }
  send_queue_.clear();
  held_.clear();
  inbox_.clear();
  // Every buffer given to the transport must be released before it is freed. A healthy peer has
  // nothing in flight here; after a failure, give up on the links that still hold buffers.
  const auto deadline = Clock::now() + (failed_ ? std::chrono::milliseconds(0) : config_.timeout);
  const auto holders = in_flight_->release_all(transport_, rank_, deadline);
  if (!holders.empty()) {
    // Freeing memory the transport may still read would be worse than leaking it.
    spdlog::error("rank {}: {} sent buffer(s) never released by the transport; leaking them", rank_,
                  holders.size());
    return;
  }
  for (float* b : staging_) backend_.deallocate_host(b);
  for (float* d : device_snapshots_) backend_.deallocate(d);
  for (float* c : compressed_) backend_.deallocate_host(c);
  if (scratch_host_) backend_.deallocate_host(scratch_host_);
  if (scratch_device_) backend_.deallocate(scratch_device_);
}

bool PushSumEngine::step(std::int64_t iteration) {
  if ((iteration + 1) % config_.gossip_every != 0) return false;
  mix();
  return true;
}

PushSumMetrics PushSumEngine::metrics() const {
  std::lock_guard lock(metrics_mutex_);
  return metrics_;
}

void PushSumEngine::debias(float* z) { backend_.debias(x_, w_, z, n_); }

void PushSumEngine::reset_weight_after_average() {
  SGP_ENFORCE(config_.mode == Mode::sync, "an exact average needs sync mode");
  w_ = 1.0;
}

void PushSumEngine::reject(RejectCause cause, const std::string& detail, int sender,
                           std::int64_t round) {
  bool first = false;
  {
    std::lock_guard lock(metrics_mutex_);
    const auto i = static_cast<std::size_t>(cause);
    ++metrics_.rejected[i];
    first = !logged_[i];
    logged_[i] = true;
    if (sender >= 0 && sender < schedule_.num_peers()) {
      auto& noted = sender_rejects_[sender];
      ++noted.count[i];
      noted.latest_round = std::max(noted.latest_round, round);
    }
  }
  if (first) {
    spdlog::warn(
        "rank {}: rejected a message ({}): {}; further ones for this cause are only "
        "counted",
        rank_, reject_cause_name(cause), detail);
  }
}

std::string PushSumEngine::rejects_from(const std::vector<int>& ranks) const {
  std::lock_guard lock(metrics_mutex_);
  std::vector<std::string> parts;
  for (int r : ranks) {
    auto it = sender_rejects_.find(r);
    if (it == sender_rejects_.end()) continue;
    std::vector<std::string> causes;
    for (int c = 0; c < kNumRejectCauses; ++c) {
      if (it->second.count[c]) {
        causes.push_back(fmt::format("{} {}", it->second.count[c],
                                     reject_cause_name(static_cast<RejectCause>(c))));
      }
    }
    parts.push_back(fmt::format("from rank {}: {} (latest for round {})", r,
                                fmt::join(causes, ", "), it->second.latest_round));
  }
  if (parts.empty()) return {};
  return fmt::format("; messages rejected {}", fmt::join(parts, "; "));
}

// The buffer this round's pushes read, but for overlap on the host (snapshot_keep_and_add): x
// itself (host memory, sync mode: zero copy), or a free host staging buffer for x in device memory.
const float* PushSumEngine::stage_for_send() {
  if (config_.sign_flip) {
    // The attack simulation: a staging buffer gets -x (sync mode on the host only).
    float* buffer = free_buffer(staging_, n_ * sizeof(float), 1);
    for (std::size_t i = 0; i < n_; ++i) buffer[i] = -x_[i];
    return buffer;
  }
  if (host_x_) return x_;
  const std::size_t max_buffers = config_.mode == Mode::sync ? 1 : config_.tau + 2;
  float* buffer = free_buffer(staging_, n_ * sizeof(float), max_buffers);
  const auto copy_start = Clock::now();
  if (config_.mode == Mode::sync) {
    backend_.download_async(buffer, x_, n_ * sizeof(float));
    backend_.wait_transfers();
  } else {
    // Overlap on a GPU: snapshot x on the device, in order with the step (fast), then download
    // the snapshot on the transfer stream while the next steps compute. The communication thread
    // waits for that download before it sends (SendJob::downloading).
    float* snapshot = device_snapshot_for(buffer);
    backend_.copy(snapshot, x_, n_ * sizeof(float));
    backend_.download_async(buffer, snapshot, n_ * sizeof(float));
  }
  std::lock_guard lock(metrics_mutex_);
  metrics_.send_seconds += seconds_since(copy_start);
  return buffer;
}

// Overlap mode, x in host memory: a free send buffer gets x while x keeps p_ii of itself and
// gets the shares of the whole messages `ready` (those readable in place), all in one pass over x
// instead of a copy, a scale and an axpy per message. w follows once the round is sent
// (account_applied). Without the communication thread, each chunk's checksum is taken right after
// its pass, while the chunk is still in cache, into chunk_hashes. The pass counts as send time.
const float* PushSumEngine::snapshot_keep_and_add(std::int64_t round,
                                                  const std::vector<DecodedMessage>& ready,
                                                  std::vector<std::uint64_t>& chunk_hashes) {
  float* buffer = free_buffer(staging_, n_ * sizeof(float), config_.tau + 2);
  const auto start = Clock::now();
  const double self_weight = schedule_.self_weight(rank_, round);
  std::vector<Share> shares;
  for (std::uint32_t c = 0; c < chunking_.chunks(); ++c) {
    shares.clear();
    for (const auto& m : ready) {
      if (m.header.chunk == c && readable_in_place(m)) shares.push_back(share_of(m));
    }
    const std::size_t offset = chunking_.offset(c);
    keep_and_add_shares(x_ + offset, chunking_.size(c), self_weight, shares, buffer + offset);
    if (!threaded()) {
      chunk_hashes.push_back(payload_hash({reinterpret_cast<const std::byte*>(buffer + offset),
                                           chunking_.size(c) * sizeof(float)}));
    }
  }
  std::lock_guard lock(metrics_mutex_);
  metrics_.send_seconds += seconds_since(start);
  return buffer;
}

// --compress: round `round`'s payload, x rounded to 16 bits into a free send buffer, while x
// keeps what the out-neighbours will not receive (x - their coefficients' sum * what they get).
const std::byte* PushSumEngine::compress_for_send(std::int64_t round) {
  const std::size_t max_buffers = config_.mode == Mode::sync ? 1 : config_.tau + 2;
  float* buffer = free_buffer(compressed_, n_ * element_bytes_, max_buffers);
  const auto start = Clock::now();
  double pushed = 0.0;
  for (const auto& edge : schedule_.out_edges(rank_, round)) pushed += edge.weight;
  compress_and_keep(config_.compression, x_, n_, static_cast<float>(pushed),
                    reinterpret_cast<std::uint16_t*>(buffer));
  std::lock_guard lock(metrics_mutex_);
  metrics_.send_seconds += seconds_since(start);
  return reinterpret_cast<const std::byte*>(buffer);
}

// A buffer of `pool` (each `bytes` long) that the transport no longer reads: a free one, a new
// one while there are fewer than max_buffers, or the first released within the timeout.
float* PushSumEngine::free_buffer(std::vector<float*>& pool, std::size_t bytes,
                                  std::size_t max_buffers) {
  const auto start = Clock::now();
  float* buffer = nullptr;
  for (float* b : pool) {
    if (!in_flight_->busy(b, bytes)) {
      buffer = b;
      break;
    }
  }
  if (buffer == nullptr && pool.size() < max_buffers) {
    buffer = static_cast<float*>(backend_.allocate_host(bytes));
    pool.push_back(buffer);
  }
  if (buffer == nullptr) {
    const int i = in_flight_->wait_any_free(pool, bytes, start + config_.timeout);
    {
      std::lock_guard lock(metrics_mutex_);
      metrics_.wait_seconds += seconds_since(start);
    }
    if (i < 0) {
      failed_ = true;
      auto holders = in_flight_->wait(nullptr, Clock::now());
      throw IoError(fmt::format(
          "rank {}: round {}: the transport still holds every send buffer after {} ms (messages "
          "to {} not delivered: peer not started, dead or not reading)",
          rank_, round_, config_.timeout.count(), ranks_text(holders)));
    }
    buffer = pool[static_cast<std::size_t>(i)];
  }
  return buffer;
}

// The device buffer paired with host staging buffer `buffer` (made on first use): it is busy
// exactly while `buffer` is, since its download into `buffer` ends before `buffer` is sent.
float* PushSumEngine::device_snapshot_for(const float* buffer) {
  const auto i = static_cast<std::size_t>(std::find(staging_.begin(), staging_.end(), buffer) -
                                          staging_.begin());
  while (device_snapshots_.size() <= i) {
    device_snapshots_.push_back(static_cast<float*>(backend_.allocate(n_ * sizeof(float))));
  }
  return device_snapshots_[i];
}

// Chunk by chunk, each chunk to every out-neighbour, so that receivers can verify and apply chunk
// c while chunk c + 1 travels. releases: one per (chunk, out-edge), chunk-major.
void PushSumEngine::send_round(std::int64_t round, const std::byte* src, double weight,
                               std::vector<transport::ReleaseFn> releases,
                               std::span<const std::uint64_t> chunk_hashes) {
  const auto start = Clock::now();
  const auto& edges = schedule_.out_edges(rank_, round);
  WireHeader h;
  h.dtype = dtype_;
  h.sender = rank_;
  h.round = round;
  h.weight = weight;
  h.total = n_;
  {
    // Counted before the sends: finish() returns once the transport released the buffers, which
    // it may do before send() returns here (overlap: on the communication thread), and
    // metrics() after finish() must include this round.
    std::lock_guard lock(metrics_mutex_);
    metrics_.messages_sent += releases.size();
    metrics_.bytes_sent += edges.size() * (chunking_.chunks() * kHeaderBytes + n_ * element_bytes_);
  }
  std::size_t i = 0;
  try {
    for (std::uint32_t c = 0; c < chunking_.chunks(); ++c) {
      h.chunk = c;
      h.offset = chunking_.offset(c);
      h.count = chunking_.size(c);
      const std::span<const std::byte> payload(src + h.offset * element_bytes_,
                                               h.count * element_bytes_);
      h.payload_hash = chunk_hashes.empty() ? payload_hash(payload) : chunk_hashes[c];
      for (const auto& edge : edges) {
        h.coefficient = edge.weight;
        const auto header = encode_header(h);
        transport_.send(edge.peer, header, payload, std::move(releases[i]));
        ++i;
      }
    }
  } catch (...) {
    // releases[i] went to the transport, which runs it; the later ones never left.
    for (std::size_t j = i + 1; j < releases.size(); ++j) releases[j]();
    throw;
  }
  std::lock_guard lock(metrics_mutex_);
  if (!threaded()) metrics_.send_seconds += seconds_since(start);  // the caller's thread
}

void PushSumEngine::mix() {
  rethrow_comm_error();
  const std::int64_t r = round_;
  const bool compressed = config_.compression != Compression::none;
  std::vector<DecodedMessage> ready;  // overlap on the host: added in the snapshot's pass
  const std::byte* src = schedule_.out_edges(rank_, r).empty() ? nullptr : send_share(r, ready);
  if (config_.mode == Mode::overlap) {
    // Compressed, or overlap on the host: x kept its share as it was staged, so only w is left
    // to scale.
    mix_overlap(r, src != nullptr && (compressed || host_x_), ready);
  } else {
    mix_sync(r, src, src != nullptr && compressed);
  }
  round_ = r + 1;
  std::lock_guard lock(metrics_mutex_);
  metrics_.rounds = round_;
}

// Stages round r's share of x (compressed, as a snapshot that keeps p_ii of x and adds `ready`,
// or x as it is) and hands its messages to the communication thread, or sends them inline.
const std::byte* PushSumEngine::send_share(std::int64_t r, std::vector<DecodedMessage>& ready) {
  const auto& edges = schedule_.out_edges(rank_, r);
  const std::byte* src = nullptr;
  std::vector<std::uint64_t> chunk_hashes;  // taken in the snapshot's pass, else by send_round
  if (config_.compression != Compression::none) {
    src = compress_for_send(r);
  } else if (config_.mode == Mode::overlap && host_x_) {
    drain_inbox();
    ready = take_ready(r);
    src = reinterpret_cast<const std::byte*>(snapshot_keep_and_add(r, ready, chunk_hashes));
  } else {
    src = reinterpret_cast<const std::byte*>(stage_for_send());
  }
  const auto start = Clock::now();
  std::vector<transport::ReleaseFn> releases;
  for (std::uint32_t c = 0; c < chunking_.chunks(); ++c) {
    for (const auto& e : edges) {
      releases.push_back(in_flight_->hold(src + chunking_.offset(c) * element_bytes_, e.peer));
    }
  }
  if (threaded()) {
    {
      std::lock_guard lock(comm_mutex_);
      send_queue_.push_back(SendJob{r, src, w_, std::move(releases), !host_x_});
    }
    transport_.wake();
    std::lock_guard lock(metrics_mutex_);
    metrics_.send_seconds += seconds_since(start);
    return src;
  }
  try {
    // Inline overlap on a GPU: the snapshot's download must be done before it is sent.
    if (config_.mode == Mode::overlap && !host_x_) backend_.wait_transfers();
    send_round(r, src, w_, std::move(releases), chunk_hashes);
  } catch (const IoError&) {
    failed_ = true;
    throw;
  }
  return src;
}

// OSGP: keep p_ii of (x, w) now; add arrivals (whole messages) as they come; wait only on
// lag > tau. x_kept: x already kept its share as it was staged.
void PushSumEngine::mix_overlap(std::int64_t r, bool x_kept,
                                const std::vector<DecodedMessage>& ready) {
  if (x_kept) {
    w_ = kept_weight(w_, schedule_.self_weight(rank_, r));
  } else {
    scale_self(r);
  }
  for (const auto& m : ready) {
    if (readable_in_place(m)) {
      account_applied(m, 0.0);  // its share of x came with the snapshot
    } else {
      apply(m);
    }
  }
  drain_inbox();
  apply_ready(r);
  wait_until_closed(r - config_.tau, r);
}

// SGP, chunk by chunk: chunk c of x is scaled by p_ii once the transport has released it (x
// itself is what was sent, on the CPU), then round-r chunks c are added as they arrive.
// compressed_sent: the compressed send already kept x's share.
void PushSumEngine::mix_sync(std::int64_t r, const std::byte* src, bool compressed_sent) {
  self_weight_ = schedule_.self_weight(rank_, r);
  sent_from_x_ = src == reinterpret_cast<const std::byte*>(x_);
  scaled_.assign(chunking_.chunks(), compressed_sent);
  w_before_ = w_;
  w_ = kept_weight(w_, self_weight_);
  if (measuring()) {
    apply_measured(r, std::nullopt);  // chunks that came early, with the previous round
  } else {
    apply_ready(r);
  }
  wait_until_complete(r);
  if (measuring()) end_measured_round(r);
  for (std::uint32_t c = 0; c < chunking_.chunks(); ++c) ensure_scaled(c);
  tracker_->advance_floor(r);
}

void PushSumEngine::finish() {
  if (config_.mode == Mode::overlap && round_ > 0) {
    rethrow_comm_error();
    wait_until_closed(round_ - 1, round_ - 1);
  }
  wait_released(nullptr, round_ - 1);
}

void PushSumEngine::scale_self(std::int64_t round) {
  const auto start = Clock::now();
  const double a = schedule_.self_weight(rank_, round);
  keep_share(backend_, x_, n_, a);
  w_ = kept_weight(w_, a);
  std::lock_guard lock(metrics_mutex_);
  metrics_.apply_seconds += seconds_since(start);
}

void PushSumEngine::ensure_scaled(std::uint32_t chunk) {
  if (scaled_[chunk]) return;
  float* part = x_ + chunking_.offset(chunk);
  if (sent_from_x_) wait_released(part, round_);
  const auto start = Clock::now();
  keep_share(backend_, part, chunking_.size(chunk), self_weight_);
  scaled_[chunk] = true;
  std::lock_guard lock(metrics_mutex_);
  metrics_.apply_seconds += seconds_since(start);
}

void PushSumEngine::admit(DecodedMessage message) {
  const auto& h = message.header;
  if (h.round > round_ && held_bytes_ + message.payload.size() > max_held_bytes_) {
    reject(RejectCause::future_round,
           fmt::format("from rank {} for round {} while mixing round {}: {} bytes already held for "
                       "later rounds (at most {})",
                       h.sender, h.round, round_, held_bytes_, max_held_bytes_),
           h.sender, h.round);
    return;
  }
  if (auto cause = tracker_->admit(h.sender, h.round, h.chunk, h.coefficient, round_)) {
    reject(*cause,
           fmt::format("from rank {} for round {} (chunk {}) while mixing round {}", h.sender,
                       h.round, h.chunk, round_),
           h.sender, h.round);
    return;
  }
  if (config_.mode == Mode::sync && h.round == round_ && !measuring()) {
    apply(message);  // sync mode admits only while mixing round_
    return;
  }
  const auto round = h.round;
  const auto chunk = h.chunk;
  held_bytes_ += message.payload.size();
  held_[round].push_back(std::move(message));
  if (measuring() && round == round_) apply_measured(round, chunk);
}

// Takes out of held_ the chunks of rounds <= up_to_round that may be applied: in sync mode all
// of them; in overlap mode only whole messages (every chunk in), so that x and w always hold the
// same messages.
std::vector<DecodedMessage> PushSumEngine::take_ready(std::int64_t up_to_round) {
  std::vector<DecodedMessage> ready;
  for (auto it = held_.begin(); it != held_.end() && it->first <= up_to_round;) {
    std::vector<DecodedMessage> keep;
    for (auto& m : it->second) {
      if (config_.mode == Mode::sync || tracker_->sender_complete(it->first, m.header.sender)) {
        held_bytes_ -= m.payload.size();
        ready.push_back(std::move(m));
      } else {
        keep.push_back(std::move(m));
      }
    }
    if (keep.empty()) {
      it = held_.erase(it);
    } else {
      it->second = std::move(keep);
      ++it;
    }
  }
  return ready;
}

void PushSumEngine::apply_ready(std::int64_t up_to_round) {
  for (const auto& m : take_ready(up_to_round)) apply(m);
}

// Sync mode: a chunk of x keeps p_ii before anything is added to it; on the host, in the same
// pass over the chunk as the first message's share.
void PushSumEngine::apply(const DecodedMessage& m) {
  const auto& h = m.header;
  const bool keep_too = config_.mode == Mode::sync && !scaled_[h.chunk] && readable_in_place(m);
  if (keep_too && sent_from_x_) wait_released(x_ + h.offset, round_);
  if (config_.mode == Mode::sync && !keep_too) ensure_scaled(h.chunk);
  const auto start = Clock::now();
  if (keep_too) {
    const Share share = share_of(m);
    keep_and_add_shares(x_ + h.offset, h.count, self_weight_, {&share, 1});
    scaled_[h.chunk] = true;
  } else {
    add_payload(m);
  }
  account_applied(m, seconds_since(start));
}

// x += p_ji * the payload, wherever it is: 16-bit values are widened in the same pass, a payload
// for x in device memory is uploaded first, a misaligned one copied first.
void PushSumEngine::add_payload(const DecodedMessage& m) {
  const auto& h = m.header;
  const double p = coefficient_of(m);
  const auto* data = m.payload.data();
  const float* src = reinterpret_cast<const float*>(data);
  if (config_.compression != Compression::none) {
    add_decompressed(config_.compression, m.payload, static_cast<float>(p), x_ + h.offset);
    return;
  }
  if (!host_x_) {
    backend_.upload_async(scratch_device_, data, m.payload.size());
    backend_.wait_transfers();
    src = scratch_device_;
  } else if (!readable_in_place(m)) {
    // Small ZeroMQ messages may sit at any offset of the receive buffer.
    if (!scratch_host_) {
      scratch_host_ = static_cast<float*>(backend_.allocate_host(n_ * sizeof(float)));
    }
    std::memcpy(scratch_host_, data, m.payload.size());
    src = scratch_host_;
  }
  add_share(backend_, p, src, x_ + h.offset, h.count);
}

// Sync mode, measuring: adds what can be added now. Without clipping, each chunk as soon as every
// in-neighbour's copy of it is in (`arrived_chunk`: the one just admitted; nullopt: look at
// every chunk); with --robust clip, the whole round once every message is in.
void PushSumEngine::apply_measured(std::int64_t round, std::optional<std::uint32_t> arrived_chunk) {
  if (config_.robust == Robust::clip) {
    if (tracker_->complete(round)) apply_round_clipped(round);
    return;
  }
  const std::uint32_t first = arrived_chunk.value_or(0);
  const std::uint32_t last = arrived_chunk ? first + 1 : chunking_.chunks();
  for (std::uint32_t c = first; c < last; ++c) {
    if (!scaled_[c] && tracker_->chunk_complete(round, c)) apply_chunk_measured(round, c);
  }
}

// Takes out of held_ the messages of `round` with chunk `chunk`.
std::vector<DecodedMessage> PushSumEngine::take_chunk(std::int64_t round, std::uint32_t chunk) {
  std::vector<DecodedMessage> taken;
  auto it = held_.find(round);
  if (it == held_.end()) return taken;
  auto& held = it->second;
  for (auto m = held.begin(); m != held.end();) {
    if (m->header.chunk == chunk) {
      held_bytes_ -= m->payload.size();
      taken.push_back(std::move(*m));
      m = held.erase(m);
    } else {
      ++m;
    }
  }
  if (held.empty()) held_.erase(it);
  return taken;
}

// Measures chunk `chunk` of every in-neighbour's message against x / w_before_, then keeps p_ii
// of x's chunk and adds the shares, in one pass over x each.
void PushSumEngine::apply_chunk_measured(std::int64_t round, std::uint32_t chunk) {
  const auto messages = take_chunk(round, chunk);
  auto start = Clock::now();
  const ChunkShares in = shares_of(messages);
  measure_chunk(chunk, messages, in);
  double seconds = seconds_since(start);
  float* part = x_ + chunking_.offset(chunk);
  if (sent_from_x_) wait_released(part, round);
  start = Clock::now();
  keep_and_add_shares(part, chunking_.size(chunk), self_weight_, in.shares);
  scaled_[chunk] = true;
  seconds += seconds_since(start);
  for (const auto& m : messages) account_applied(m, seconds / static_cast<double>(messages.size()));
}

// --robust clip, once every message of the round is in: measures them all, then adds each
// sender's model clipped to the radius around x / w_before_ (see push_sum_engine.hpp): its share
// of x scaled by s_j, and the rest of its weight's share as x / w_before_, which joins p_ii.
void PushSumEngine::apply_round_clipped(std::int64_t round) {
  auto start = Clock::now();
  std::vector<std::vector<DecodedMessage>> messages(chunking_.chunks());
  std::vector<ChunkShares> shares(chunking_.chunks());
  for (std::uint32_t c = 0; c < chunking_.chunks(); ++c) {
    messages[c] = take_chunk(round, c);
    shares[c] = shares_of(messages[c]);
    measure_chunk(c, messages[c], shares[c]);
  }
  std::map<int, double> scale;  // s_j by sender
  double self = self_weight_;
  std::uint64_t clipped = 0;
  const auto distances = record_distances(round);
  const double radius = watch_->clip_radius();
  for (const auto& m : messages[0]) {
    const double d = distances.at(m.header.sender);
    // A suspect's model is not taken at all (radius 0), its weight still is.
    const double s = watch_->suspected(m.header.sender) ? 0.0 : d <= radius ? 1.0 : radius / d;
    scale[m.header.sender] = s;
    self += coefficient_of(m) * m.header.weight * (1.0 - s) / w_before_;
    clipped += s < 1.0;
  }
  double seconds = seconds_since(start);
  for (std::uint32_t c = 0; c < chunking_.chunks(); ++c) {
    for (std::size_t k = 0; k < messages[c].size(); ++k) {
      shares[c].shares[k].coefficient *= scale.at(messages[c][k].header.sender);
    }
    float* part = x_ + chunking_.offset(c);
    if (sent_from_x_) wait_released(part, round);
    start = Clock::now();
    keep_and_add_shares(part, chunking_.size(c), self, shares[c].shares);
    scaled_[c] = true;
    seconds += seconds_since(start);
  }
  for (const auto& chunk : messages) {
    for (const auto& m : chunk)
      account_applied(m, seconds / static_cast<double>(chunk.size() * messages.size()));
  }
  std::lock_guard lock(metrics_mutex_);
  metrics_.clipped_messages += clipped;
}

// The messages of one chunk as shares of x: readable in place, or copied aligned into `copies`.
PushSumEngine::ChunkShares PushSumEngine::shares_of(
    const std::vector<DecodedMessage>& messages) const {
  ChunkShares out;
  out.copies.reserve(messages.size());
  for (const auto& m : messages) {
    const float* floats = reinterpret_cast<const float*>(m.payload.data());
    if (!readable_in_place(m)) {
      auto& copy = out.copies.emplace_back(m.header.count);
      std::memcpy(copy.data(), m.payload.data(), m.payload.size());
      floats = copy.data();
    }
    out.shares.push_back({coefficient_of(m), floats});
    out.sender_w.push_back(m.header.weight);
  }
  return out;
}

// Adds chunk `chunk`'s squared distances of `messages` (as `in`) and of ||z_i||^2 to the round's.
void PushSumEngine::measure_chunk(std::uint32_t chunk, const std::vector<DecodedMessage>& messages,
                                  const ChunkShares& in) {
  measured_ = true;
  std::vector<double> squared(messages.size(), 0.0);
  own_norm_squared_ +=
      add_squared_distances(x_ + chunking_.offset(chunk), w_before_, chunking_.size(chunk),
                            in.shares, in.sender_w, squared);
  for (std::size_t k = 0; k < messages.size(); ++k) {
    squared_distance_[messages[k].header.sender] += squared[k];
  }
}

// Hands the round's distances to the watch; returns them by sender.
std::map<int, double> PushSumEngine::record_distances(std::int64_t round) {
  std::map<int, double> distances;
  const int phase = schedule_.phase_of(round);
  for (const auto& [sender, squared] : squared_distance_) {
    distances[sender] = std::sqrt(squared);
    watch_->record(phase, sender, distances[sender]);
  }
  squared_distance_.clear();
  return distances;
}

// After every message of the round was added: its distances to the watch (unless clipping did
// that), the watch's verdict, and any new suspect in the metrics.
void PushSumEngine::end_measured_round(std::int64_t round) {
  const bool measured = measured_;
  measured_ = false;
  record_distances(round);
  const double own_norm = std::sqrt(own_norm_squared_);
  own_norm_squared_ = 0.0;
  if (!measured || !watch_->end_round(round, own_norm)) return;
  std::lock_guard lock(metrics_mutex_);
  metrics_.suspects = watch_->suspects();
}

// Whether the payload can be added as it lies: float32 values, aligned, in host memory like x.
bool PushSumEngine::readable_in_place(const DecodedMessage& m) const {
  return host_x_ && config_.compression == Compression::none &&
         reinterpret_cast<std::uintptr_t>(m.payload.data()) % alignof(float) == 0;
}

// The schedule's p_ji (the header's coefficient was checked against it): the sender kept exactly
// 1 - sum of these, so mass is conserved to the last bit the arithmetic allows.
double PushSumEngine::coefficient_of(const DecodedMessage& m) const {
  return schedule_.push_weight(m.header.sender, rank_, m.header.round);
}

// A payload readable in place, as a share of x.
Share PushSumEngine::share_of(const DecodedMessage& m) const {
  return {coefficient_of(m), reinterpret_cast<const float*>(m.payload.data())};
}

// After m's share of x was added: its share of w (once per sender and round) and the metrics.
void PushSumEngine::account_applied(const DecodedMessage& m, double apply_seconds) {
  const auto& h = m.header;
  if (h.chunk == 0) w_ = added_weight(w_, coefficient_of(m), h.weight);
  std::lock_guard lock(metrics_mutex_);
  metrics_.messages_received += 1;
  metrics_.bytes_received += kHeaderBytes + m.payload.size();
  metrics_.apply_seconds += apply_seconds;
}

// The next accepted-by-format message, or nothing at the deadline. Time blocked counts as wait;
// in sync mode the checksums (decode) count as apply time, in overlap mode the communication
// thread does them.
std::optional<DecodedMessage> PushSumEngine::next_message(Clock::time_point deadline) {
  if (threaded()) {
    const auto start = Clock::now();
    std::unique_lock lock(comm_mutex_);
    inbox_ready_.wait_until(lock, deadline, [&] { return !inbox_.empty() || comm_error_; });
    lock.unlock();
    add_wait(start);
    lock.lock();
    if (comm_error_ || inbox_.empty()) return std::nullopt;
    DecodedMessage m = std::move(inbox_.front());
    inbox_.pop_front();
    return m;
  }
  for (auto now = Clock::now(); now < deadline; now = Clock::now()) {
    auto message = transport_.receive(std::chrono::ceil<std::chrono::milliseconds>(deadline - now));
    add_wait(now);
    if (!message) continue;
    const auto start = Clock::now();
    auto decoded = decode(std::move(*message));
    {
      std::lock_guard lock(metrics_mutex_);
      metrics_.apply_seconds += seconds_since(start);
    }
    if (decoded) return decoded;
  }
  return std::nullopt;
}

std::optional<DecodedMessage> PushSumEngine::decode(transport::Message message) {
  const std::size_t frames = message.num_frames();
  const std::size_t bytes = message.total_bytes();
  std::array<std::byte, kHeaderBytes> head{};
  const bool has_header = frames > 0 && message.frame(0).size() == kHeaderBytes;
  if (has_header) std::copy_n(message.frame(0).begin(), kHeaderBytes, head.begin());
  auto result = decode_message(std::move(message), chunking_, schedule_.num_peers(), rank_, dtype_);
  auto* cause = std::get_if<RejectCause>(&result);
  if (!cause) return std::move(std::get<DecodedMessage>(result));
  const auto claimed = has_header ? parse_header(head) : std::nullopt;
  if (!claimed) {
    reject(*cause, fmt::format("{} frame(s), {} bytes", frames, bytes));
    return std::nullopt;
  }
  std::string detail = fmt::format("from rank {} for round {} (chunk {}), {} bytes",
                                   claimed->sender, claimed->round, claimed->chunk, bytes);
  if (*cause == RejectCause::non_finite) {
    detail +=
        fmt::format(": NaN or infinite values (rank {} diverged or is faulty)", claimed->sender);
  } else if (*cause == RejectCause::bad_weight) {
    detail += fmt::format(": weight {} (must be in (0, {}]), coefficient {}", claimed->weight,
                          schedule_.num_peers(), claimed->coefficient);
  }
  reject(*cause, detail, claimed->sender, claimed->round);
  return std::nullopt;
}

void PushSumEngine::drain_inbox() {
  if (!threaded()) {
    // Inline overlap: whatever the transport holds now, without waiting.
    while (auto message = transport_.receive(std::chrono::milliseconds(0))) {
      if (auto decoded = decode(std::move(*message))) admit(std::move(*decoded));
    }
    return;
  }
  std::deque<DecodedMessage> arrived;
  {
    std::lock_guard lock(comm_mutex_);
    arrived.swap(inbox_);
  }
  for (auto& m : arrived) admit(std::move(m));
}

void PushSumEngine::wait_until_complete(std::int64_t round) {
  const auto deadline = Clock::now() + config_.timeout;
  while (!tracker_->complete(round)) {
    auto m = next_message(deadline);
    if (!m) fail_missing(round);
    admit(std::move(*m));
  }
}

// Overlap: rounds <= target must be closed (all messages in); arrivals up to `apply_limit` are
// applied as they come.
void PushSumEngine::wait_until_closed(std::int64_t target, std::int64_t apply_limit) {
  const auto deadline = Clock::now() + config_.timeout;
  tracker_->advance_floor(apply_limit);
  while (tracker_->floor() < target) {
    auto m = next_message(deadline);
    if (!m) {
      rethrow_comm_error();
      fail_missing(tracker_->floor() + 1);
    }
    admit(std::move(*m));
    apply_ready(apply_limit);
    tracker_->advance_floor(apply_limit);
  }
}

void PushSumEngine::add_wait(Clock::time_point start) {
  std::lock_guard lock(metrics_mutex_);
  metrics_.wait_seconds += seconds_since(start);
}

void PushSumEngine::fail_missing(std::int64_t round) {
  failed_ = true;
  const auto missing = tracker_->missing(round);
  const std::string rejected = rejects_from(missing);
  throw IoError(fmt::format(
      "rank {}: no message from {} for gossip round {} within {} ms ({}){}", rank_,
      ranks_text(missing), round, config_.timeout.count(),
      rejected.empty() ? "peer not started, dead or too slow" : "none that could be accepted",
      rejected));
}

void PushSumEngine::wait_released(const void* buffer, std::int64_t round) {
  const auto start = Clock::now();
  auto holders = in_flight_->wait(buffer, start + config_.timeout);
  add_wait(start);
  if (!holders.empty()) {
    failed_ = true;
    throw IoError(fmt::format(
        "rank {}: gossip round {}: messages to {} not delivered within {} ms (peer not started, "
        "dead or not reading)",
        rank_, round, ranks_text(holders), config_.timeout.count()));
  }
}

void PushSumEngine::rethrow_comm_error() {
  std::lock_guard lock(comm_mutex_);
  if (comm_error_) {
    failed_ = true;
    std::rethrow_exception(comm_error_);
  }
}

void PushSumEngine::comm_loop() {
  try {
    for (;;) {
      std::deque<SendJob> jobs;
      {
        std::lock_guard lock(comm_mutex_);
        if (stop_ && send_queue_.empty()) return;
        jobs.swap(send_queue_);
      }
      for (std::size_t i = 0; i < jobs.size(); ++i) {
        try {
          if (jobs[i].downloading) backend_.wait_transfers();
          send_round(jobs[i].round, jobs[i].src, jobs[i].weight, std::move(jobs[i].releases));
        } catch (...) {
          for (std::size_t j = i + 1; j < jobs.size(); ++j) {
            for (auto& release : jobs[j].releases) release();
          }
          throw;
        }
      }
      // Blocks until a message arrives, wake() (a new job, or stop) or the poll period ends.
      auto message = transport_.receive(std::chrono::milliseconds(200));
      if (!message) continue;
      if (auto decoded = decode(std::move(*message))) {
        {
          std::lock_guard lock(comm_mutex_);
          inbox_.push_back(std::move(*decoded));
        }
        inbox_ready_.notify_one();
      }
    }
  } catch (...) {
    {
      std::lock_guard lock(comm_mutex_);
      comm_error_ = std::current_exception();
    }
    inbox_ready_.notify_all();
  }
}

void PushSumEngine::restore(std::int64_t round, double weight) {
  SGP_ENFORCE(round_ == 0, "restore() after {} rounds were mixed", round_);
  SGP_ENFORCE(round >= 0, "cannot restore round {}", round);
  SGP_ENFORCE(weight > 0.0 && std::isfinite(weight), "restored push-sum weight is {}", weight);
  round_ = round;
  w_ = weight;
  tracker_->restart_at(round - 1);
  std::lock_guard lock(metrics_mutex_);
  metrics_.rounds = round_;
}

}  // namespace sgp::gossip
