#pragma once
// Ring AllReduce (the `allreduce` algorithm, the baseline SGP is compared with): every round ends
// with x = the exact average of all peers' x, bit for bit the same on every peer. Bandwidth
// optimal: each peer sends and receives 2 (N - 1) / N of the vector per round, over the links
// rank -> rank + 1 (mod N) only.
//
// x is cut into N segments (segment s: elements s n / N .. (s + 1) n / N - 1), each segment into
// chunks of the push-sum chunk size. At step g = 0 .. 2N - 3 rank r sends segment (r - g) mod N to
// r + 1 and receives segment (r - 1 - g) mod N from r - 1:
//   - reduce-scatter, g < N - 1: it adds the received partial sums to its own; after the last
//     one (g = N - 2) it holds the complete sum of segment r + 1 and divides it by N. That one
//     owner computes each segment's final value;
//   - all-gather, g >= N - 1: it overwrites its segment with the owner's final values.
// Pipelined by chunk: chunk c received at step g is forwarded at step g + 1 as soon as it is
// added (the segment sent at g + 1 is the one received at g), so the ring streams chunks.
//
// Messages are wire dtype 3 (wire_format.hpp). A link delivers in order, so the receiver
// expects exactly the next (round, step, chunk) from rank r - 1; anything else is rejected and
// counted, never applied. The push-sum weight stays 1. CPU: x itself is sent (zero copy) and a
// chunk is overwritten only after the transport released it; GPU: x is staged through host
// memory once per round.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "sgp/compute/backend.hpp"
#include "sgp/gossip/mixer.hpp"
#include "sgp/gossip/push_sum_config.hpp"
#include "sgp/gossip/wire_format.hpp"
#include "sgp/transport/transport.hpp"

namespace sgp::gossip {

class InFlight;

class RingAllReduce final : public Mixer {
 public:
  // x: n floats in backend memory (outlives the engine); num_peers ranks, this one the
  // transport's. config: gossip_every, timeout, chunk_elements.
  RingAllReduce(compute::Backend& backend, int num_peers, transport::Transport& transport, float* x,
                std::size_t n, PushSumConfig config = {});
  // Waits (bounded) until the transport released every chunk of x it was given.
  ~RingAllReduce() override;

  bool step(std::int64_t iteration) override;
  // One allreduce: returns with x the average. IoError naming the peer and round when a message
  // is missing past the timeout.
  void mix();
  void finish() override;
  void restore(std::int64_t round, double weight) override;
  void debias(float* z) override;
  std::optional<double> z_scale() const override { return 1.0; }  // x is z
  double weight() const override { return 1.0; }
  std::int64_t round() const override { return round_; }
  PushSumMetrics metrics() const override;

  // Segment s of a vector of n elements over num_peers: [begin, end).
  static std::size_t segment_begin(std::size_t n, int num_peers, int segment);

 private:
  using Clock = std::chrono::steady_clock;
  struct Position {
    int step = 0;
    std::uint32_t chunk = 0;
  };

  int segment_sent(int step) const;      // by this rank at `step`
  int segment_received(int step) const;  // by this rank at `step`
  Chunking segment_chunking(int segment) const;
  std::optional<Position> first_position() const;
  std::optional<Position> next_position(Position p) const;
  void send_chunk(int step, std::uint32_t chunk);
  DecodedMessage receive_expected(Position expected);
  std::optional<DecodedMessage> decode(transport::Message message, Position expected);
  void apply(const DecodedMessage& m, int step);
  void wait_released(const void* chunk);
  void reject(RejectCause cause, const std::string& detail);

  compute::Backend& backend_;
  int num_peers_;
  transport::Transport& transport_;
  float* x_;
  std::size_t n_;
  PushSumConfig config_;
  int rank_;
  bool host_x_;
  float* work_;                    // x itself (CPU) or a host copy of it (GPU)
  float* staging_host_ = nullptr;  // GPU: the host copy
  std::uint64_t per_chunk_;        // elements per chunk (whole-vector chunking's size)
  std::int64_t round_ = 0;
  bool failed_ = false;
  std::shared_ptr<InFlight> in_flight_;

  mutable std::mutex metrics_mutex_;
  PushSumMetrics metrics_;
  bool logged_reject_ = false;
};

}  // namespace sgp::gossip
