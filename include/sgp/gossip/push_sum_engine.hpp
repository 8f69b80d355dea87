#pragma once
// The push-sum gossip engine of one peer (Assran et al. 2019, Algorithm 1 = SGP and its overlap
// variant OSGP). State: the caller's flat parameter buffer x (backend memory, CPU or GPU) and the
// push-sum weight w (starts at 1). Round k:
//   keep p_ii * (x, w), push p_ji * (x, w) to each out-neighbour j of phase k % period,
//   add what the in-neighbours pushed for round k.  De-biased parameters: z = x / w.
// Messages carry x UNSCALED plus the coefficient p_ji (see wire_format.hpp), so on the CPU the
// caller's x goes to the transport without a copy; GPU buffers are staged through host memory.
// With compression (PushSumConfig::compression, CPU only) x is rounded to 16 bits into a send
// buffer and, in the same pass, x keeps x - (1 - p_ii) * decompress(sent) instead of p_ii x.
// x travels in chunks (PushSumConfig::chunk_elements): sync mode checks and adds chunk c of an
// in-neighbour's message while later chunks are still on the wire, and scales its own chunk c by
// p_ii once the transport has released it (on the CPU, in the same pass as the first message's
// chunk c); overlap mode adds only whole messages, so x and w always contain the same messages.
//
// Sync mode, CPU: x is read by the transport during mix() and written by it; nobody else may
// touch x then. Overlap mode: mix() copies x into a snapshot that is sent while the caller goes
// on computing (on the CPU, in one pass with the scale by p_ii and the whole messages already in);
// between mix() calls the caller may change x freely (the SGD step of OSGP).
//
// Sync mode on the host with float32 payloads, each in-neighbour's message is measured against
// this peer's model before it is added (NeighbourWatch: suspects are named in the log and in
// metrics()): chunk c of the round is added once every in-neighbour's chunk c is in, in a pass
// that first takes the chunk's distances. With --robust clip (ClippedGossip) the whole round is
// held until every message is in, measured, and then added with each sender's model clipped to
// the radius around this peer's own z = x / w:
//   z~_j = z_i + s_j (z_j - z_i),  s_j = min(1, radius / ||z_j - z_i||),
//   x += p_ij w_j z~_j = p_ij s_j x_j + p_ij w_j (1 - s_j) z_i,   w += p_ij w_j (unchanged).
// The weights stay exact push-sum; the sum of x over the peers is not conserved once something
// is clipped (see README, security).
//
// After mix() or finish() threw IoError the engine is failed: destroy it (that is safe and
// bounded) and stop.
//
// The engine sees only the abstract Transport, the Schedule and the compute Backend. It is used
// from one thread (the peer's compute thread); in overlap mode it owns one communication thread.
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "sgp/compute/backend.hpp"
#include "sgp/gossip/mixer.hpp"
#include "sgp/gossip/push_sum_arithmetic.hpp"
#include "sgp/gossip/push_sum_config.hpp"
#include "sgp/gossip/wire_format.hpp"
#include "sgp/topology/schedule.hpp"
#include "sgp/transport/transport.hpp"

namespace sgp::gossip {

class InFlight;
class NeighbourWatch;
class RoundTracker;

class PushSumEngine final : public Mixer {
 public:
  // x: n floats in `backend`'s memory, the caller's parameters (the engine mixes them in place
  // and never frees them; they must outlive the engine). The transport's rank is this peer's
  // rank in `schedule`. w starts at 1.
  PushSumEngine(compute::Backend& backend, topology::Schedule schedule,
                transport::Transport& transport, float* x, std::size_t n,
                PushSumConfig config = {});
  // Stops the communication thread and waits (bounded) until the transport has released every
  // buffer it was given.
  ~PushSumEngine() override;

  // Gossips (mix()) when (iteration + 1) % gossip_every == 0; returns whether it did.
  bool step(std::int64_t iteration) override;
  // One push-sum round (round() is its number). Sync: returns once the round is complete.
  // Overlap: queues this round's pushes, applies what has arrived, and blocks only while some
  // in-neighbour's messages of a round <= round() - tau are missing.
  // Throws IoError naming the peer and round when a message is missing past the timeout.
  void mix();
  // Overlap: blocks until every message of every round mixed so far has been received and
  // applied and every sent buffer released (mass is then exactly where sync mode puts it).
  // Sync: waits for outstanding buffer releases only.
  void finish() override;

  // Resuming from a checkpoint: `round` rounds were completed and the push-sum weight was
  // `weight` (x itself is the caller's buffer, restored by the caller). Only before the first
  // mix(); every peer must resume from the same round (sync) or from a finish()ed state.
  void restore(std::int64_t round, double weight) override;

  // After an exact average done outside this engine (PeriodicAverage), which left x = z: w = 1.
  // Sync mode, between rounds.
  void reset_weight_after_average();

  // z = x / w (z: n floats in backend memory).
  void debias(float* z) override;
  std::optional<double> z_scale() const override { return 1.0 / w_; }
  double weight() const override { return w_; }
  std::int64_t round() const override { return round_; }  // rounds mixed so far
  int rank() const { return rank_; }
  std::size_t size() const { return n_; }
  const PushSumConfig& config() const { return config_; }
  const topology::Schedule& schedule() const { return schedule_; }
  PushSumMetrics metrics() const override;

 private:
  using Clock = std::chrono::steady_clock;

  const float* stage_for_send();
  const float* snapshot_keep_and_add(std::int64_t round, const std::vector<DecodedMessage>& ready,
                                     std::vector<std::uint64_t>& chunk_hashes);
  const std::byte* compress_for_send(std::int64_t round);
  float* free_buffer(std::vector<float*>& pool, std::size_t bytes, std::size_t max_buffers);
  // chunk_hashes: each chunk's payload_hash, when already known (else taken here).
  void send_round(std::int64_t round, const std::byte* src, double weight,
                  std::vector<transport::ReleaseFn> releases,
                  std::span<const std::uint64_t> chunk_hashes = {});
  const std::byte* send_share(std::int64_t round, std::vector<DecodedMessage>& ready);
  void mix_overlap(std::int64_t round, bool x_kept, const std::vector<DecodedMessage>& ready);
  void mix_sync(std::int64_t round, const std::byte* src, bool compressed_sent);
  void scale_self(std::int64_t round);
  void ensure_scaled(std::uint32_t chunk);
  std::optional<DecodedMessage> next_message(Clock::time_point deadline);
  std::optional<DecodedMessage> decode(transport::Message message);
  void drain_inbox();
  void admit(DecodedMessage message);
  std::vector<DecodedMessage> take_ready(std::int64_t up_to_round);
  void apply_ready(std::int64_t up_to_round);
  void apply(const DecodedMessage& message);
  void add_payload(const DecodedMessage& message);
  bool measuring() const { return watch_ != nullptr; }
  void apply_measured(std::int64_t round, std::optional<std::uint32_t> arrived_chunk);
  std::vector<DecodedMessage> take_chunk(std::int64_t round, std::uint32_t chunk);
  // A chunk's messages as shares of x and their senders' weights; `copies` holds aligned copies
  // of payloads not readable in place.
  struct ChunkShares {
    std::vector<Share> shares;
    std::vector<double> sender_w;
    std::vector<std::vector<float>> copies;
  };
  ChunkShares shares_of(const std::vector<DecodedMessage>& messages) const;
  void measure_chunk(std::uint32_t chunk, const std::vector<DecodedMessage>& messages,
                     const ChunkShares& in);
  void apply_chunk_measured(std::int64_t round, std::uint32_t chunk);
  void apply_round_clipped(std::int64_t round);
  std::map<int, double> record_distances(std::int64_t round);
  void end_measured_round(std::int64_t round);
  bool readable_in_place(const DecodedMessage& message) const;
  double coefficient_of(const DecodedMessage& message) const;
  Share share_of(const DecodedMessage& message) const;
  void account_applied(const DecodedMessage& message, double apply_seconds);
  void wait_until_complete(std::int64_t round);
  void wait_until_closed(std::int64_t target, std::int64_t apply_limit);
  void wait_released(const void* buffer, std::int64_t round);
  void add_wait(Clock::time_point start);
  [[noreturn]] void fail_missing(std::int64_t round);
  // `sender`, `round`: who the message says it is from, when its header is well-formed (-1: not).
  void reject(RejectCause cause, const std::string& detail, int sender = -1,
              std::int64_t round = -1);
  // What was rejected from each of `ranks`, for the time-out message ("" when nothing).
  std::string rejects_from(const std::vector<int>& ranks) const;
  void comm_loop();
  // Overlap mode with its communication thread (PushSumConfig::comm_thread).
  bool threaded() const { return config_.mode == Mode::overlap && config_.comm_thread; }
  float* device_snapshot_for(const float* buffer);
  void rethrow_comm_error();

  compute::Backend& backend_;
  topology::Schedule schedule_;
  transport::Transport& transport_;
  float* x_;
  std::size_t n_;
  PushSumConfig config_;
  int rank_;
  bool host_x_;  // x lives in host memory (CPU backend): sent and read without staging
  double w_ = 1.0;
  std::int64_t round_ = 0;
  bool failed_ = false;

  Chunking chunking_;
  // Sync mode, the round being mixed: p_ii, whether x itself was sent, chunks already scaled.
  double self_weight_ = 1.0;
  bool sent_from_x_ = false;
  std::vector<bool> scaled_;
  std::shared_ptr<InFlight> in_flight_;   // shared with release callbacks that may outlive us
  std::vector<float*> staging_;           // host buffers (allocate_host) for snapshots / GPU
  std::vector<float*> device_snapshots_;  // GPU, overlap: staging_[i]'s source, copied from x
  // --compress: host buffers of n 16-bit values each (the pool logic is staging_'s).
  std::vector<float*> compressed_;
  std::uint16_t dtype_;              // of the messages sent and accepted
  std::size_t element_bytes_;        // of their payload
  float* scratch_host_ = nullptr;    // aligned copy of a misaligned received payload
  float* scratch_device_ = nullptr;  // GPU: upload target of a received payload
  std::unique_ptr<RoundTracker> tracker_;
  // Sync mode on the host: the in-neighbours' distances; this round's squared distances by sender
  // and ||z_i||^2, measured against x / w_before_ (w before the round).
  std::unique_ptr<NeighbourWatch> watch_;
  std::map<int, double> squared_distance_;
  double own_norm_squared_ = 0.0;
  bool measured_ = false;  // something was measured this round
  double w_before_ = 1.0;
  std::map<std::int64_t, std::vector<DecodedMessage>> held_;  // accepted, not yet applied
  std::uint64_t held_bytes_ = 0;                              // their payloads
  std::uint64_t max_held_bytes_ = 0;

  mutable std::mutex metrics_mutex_;
  PushSumMetrics metrics_;
  std::array<bool, kNumRejectCauses> logged_{};
  struct SenderRejects {
    std::array<std::uint64_t, kNumRejectCauses> count{};
    std::int64_t latest_round = -1;
  };
  std::map<int, SenderRejects> sender_rejects_;  // by the rank a message claimed

  // Overlap mode: the communication thread and its queues.
  struct SendJob {
    std::int64_t round;
    const std::byte* src;
    double weight;
    std::vector<transport::ReleaseFn> releases;  // one per out-edge, in order
    bool downloading;  // GPU: src is still being filled by the backend's transfer stream
  };
  std::mutex comm_mutex_;
  std::condition_variable inbox_ready_;
  std::deque<SendJob> send_queue_;
  std::deque<DecodedMessage> inbox_;
  std::exception_ptr comm_error_;
  bool stop_ = false;
  std::thread comm_thread_;
};

}  // namespace sgp::gossip
