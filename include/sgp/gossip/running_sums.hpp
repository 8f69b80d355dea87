#pragma once
// The two ends of one directed edge of asynchronous push-sum with running sums (Vaidya,
// Hadjicostis & Dominguez-Garcia 2011; Spiridonoff, Olshevsky & Paschalidis 2020).
//
// The sender keeps the TOTAL mass it ever pushed on the edge (sum over its rounds of p_ji x_i,
// and of p_ji w_i), in double so that a long run loses no precision, and sends that total. The
// receiver keeps the total it last applied and adds the difference. A lost message costs
// nothing (the next total carries its mass), a duplicate or an overtaken older total is
// recognised by its sequence number (the sender's round) and skipped. Each chunk of the vector
// has its own sequence number, so chunks of different sends may be applied independently.
//
// With running sums off, every message carries only the mass pushed since the previous send and
// is added as it comes: plain push-sum, which faults bias (kept to measure exactly that).
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace sgp::gossip {

// Which totals an edge carries (the header's 64-bit epoch): the incarnations of its sender and
// receiver (24 bits each: totals restart when either rejoins) and the sender's mass generation
// (16 bits: it restarts its totals, renormalised, after each exclusion it learns of).
struct EdgeEpoch {
  std::uint32_t sender_incarnation = 0;
  std::uint32_t receiver_incarnation = 0;
  std::uint32_t generation = 0;

  std::uint64_t pack() const {
    return (std::uint64_t{sender_incarnation & 0xffffffu} << 40) |
           (std::uint64_t{receiver_incarnation & 0xffffffu} << 16) | (generation & 0xffffu);
  }
  static EdgeEpoch unpack(std::uint64_t bits) {
    return {static_cast<std::uint32_t>(bits >> 40),
            static_cast<std::uint32_t>(bits >> 16) & 0xffffffu,
            static_cast<std::uint32_t>(bits) & 0xffffu};
  }
};

// One send buffer: a snapshot of the edge's total, on the wire until every chunk is released.
struct SendBuffer {
  std::vector<double> values;
  std::atomic<int> chunks_on_wire{0};
};

class OutEdge {
 public:
  OutEdge(std::size_t n, std::uint64_t epoch);
  std::uint64_t epoch() const { return epoch_; }
  // total += coefficient * (x, w).
  void push(double coefficient, std::span<const double> x, double w);
  // A free buffer holding the total (and, with running sums off, the total restarted at zero),
  // or nullptr when both buffers are still on the wire: the push is skipped, nothing is lost.
  std::shared_ptr<SendBuffer> snapshot(bool running_sums, int chunks, double& weight_out);
  // Whether a buffer is still on the wire.
  bool busy() const;

 private:
  std::uint64_t epoch_;
  std::vector<double> total_;
  double total_w_ = 0.0;
  std::array<std::shared_ptr<SendBuffer>, 2> buffers_;
};

class InEdge {
 public:
  InEdge(std::size_t n, std::uint32_t chunks, std::uint64_t epoch);
  std::uint64_t epoch() const { return epoch_; }
  // Applies one chunk (elements offset .. offset + values.size() - 1) sent at `sequence`: adds
  // the difference from the last applied total to x, and that of the weight to w. Returns
  // whether anything was applied (false: an older or repeated total).
  bool apply(bool running_sums, std::uint32_t chunk, std::int64_t sequence, std::size_t offset,
             std::span<const double> values, double weight, std::span<double> x, double& w);

 private:
  std::uint64_t epoch_;
  std::vector<double> applied_;
  double applied_w_ = 0.0;
  std::vector<std::int64_t> chunk_sequence_;
  std::int64_t weight_sequence_ = -1;
};

}  // namespace sgp::gossip
