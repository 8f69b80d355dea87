#pragma once
// The two ends of one directed edge of asynchronous push-sum with running sums (Vaidya,
// Hadjicostis & Dominguez-Garcia 2011; Spiridonoff, Olshevsky & Paschalidis 2020).
//
// The sender keeps the TOTAL mass it ever pushed on the edge (sum over its rounds of p_ji x_i,
// and of p_ji w_i), in double so that a long run loses no precision, and sends that total: in
// float64 at the first send of each window of kDeltaWindowRounds rounds (the base), in between
// as its float32 difference from that base (wire_format.hpp, dtype 6; docs/asynchronous.md for
// the error). The receiver keeps the total it last applied (base + delta) and adds the
// difference. A lost message costs nothing (the next total carries its mass), a duplicate or an
// overtaken older total is recognised by its sequence number (the sender's round) and skipped.
// Each chunk of the vector has its own sequence number, so chunks of different sends may be
// applied independently.
//
// With running sums off, every message carries only the mass pushed since the previous send and
// is added as it comes: plain push-sum, which faults bias (kept to measure exactly that).
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "sgp/gossip/wire_format.hpp"

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

// The window of kDeltaWindowRounds rounds a round belongs to (floor division: a hostile
// header's negative round falls in a window of its own).
std::int64_t delta_window(std::int64_t round);

// One send buffer: a snapshot of the edge's total (dtype 2) or of its delta from the base
// (dtype 6), on the wire until every chunk is released.
struct SendBuffer {
  std::uint16_t dtype = kDtypeFloat64Total;
  std::vector<double> totals;  // dtype 2
  std::vector<float> deltas;   // dtype 6
  std::atomic<int> chunks_on_wire{0};
  // Elements offset .. offset + count - 1 of what this snapshot holds, as bytes.
  std::span<const std::byte> payload(std::size_t offset, std::size_t count) const;
};

class OutEdge {
 public:
  OutEdge(std::size_t n, std::uint64_t epoch);
  std::uint64_t epoch() const { return epoch_; }
  // total += coefficient * (x, w).
  void push(double coefficient, std::span<const double> x, double w);
  // A free buffer holding what to send at `round`, or nullptr when both buffers are still on
  // the wire (the push is skipped, nothing is lost). With running sums: the total in float64
  // (dtype 2, the new base) when it is the window's first send or `exact` is asked for (after
  // which the window sends only totals), otherwise its delta from the base in float32
  // (dtype 6). Without: the total in float64, restarted at zero.
  std::shared_ptr<SendBuffer> snapshot(bool running_sums, bool exact, std::int64_t round,
                                       int chunks, double& weight_out);
  // push() then snapshot(), in one pass over the vectors when the snapshot is a delta (a
  // round's usual send).
  std::shared_ptr<SendBuffer> push_and_snapshot(double coefficient, std::span<const double> x,
                                                double w, bool exact, std::int64_t round,
                                                int chunks, double& weight_out);
  // Whether a buffer is still on the wire.
  bool busy() const;
  // Bytes held for the vector: totals, base and send buffers.
  std::size_t state_bytes() const;

 private:
  std::shared_ptr<SendBuffer> free_buffer();
  bool sends_delta(bool running_sums, bool exact, std::int64_t round) const;
  void fill_total(SendBuffer& b, bool running_sums);
  void fill_delta(SendBuffer& b) const;

  std::uint64_t epoch_;
  std::vector<double> total_;
  std::vector<double> base_;  // the total this edge last sent as a base
  double total_w_ = 0.0;
  std::optional<std::int64_t> base_window_;  // the window of base_, if any
  bool window_exact_ = false;                // a total sent on demand in base_window_: no deltas
  std::array<std::shared_ptr<SendBuffer>, 2> buffers_;
};

// What InEdge::apply did with one chunk.
enum class Applied {
  yes,
  repeat,   // an older or repeated total or delta: skipped, nothing lost
  no_base,  // a delta whose base this receiver does not hold: refused (RejectCause::unknown_base)
};

class InEdge {
 public:
  InEdge(std::size_t n, std::uint32_t chunks, std::uint64_t epoch);
  std::uint64_t epoch() const { return epoch_; }
  // One chunk (elements offset .. offset + count - 1) sent at `sequence` (the sender's round).
  // Running sums: a total (dtype 2) adds to x its difference from what this edge applied so far
  // and becomes the chunk's base; a delta (dtype 6) on the base held adds its difference from
  // the last delta applied. w takes the weight's difference likewise, once per sequence.
  // Without running sums (dtype 2 only): the values and weight are added as they come.
  struct Chunk {
    std::uint16_t dtype = kDtypeFloat64Total;
    std::uint32_t index = 0;
    std::int64_t sequence = 0;
    std::size_t offset = 0;
    std::span<const std::byte> payload;  // float64 or float32 values, aligned for them
    double weight = 0.0;
  };
  Applied apply(bool running_sums, const Chunk& chunk, std::span<double> x, double& w);
  // Bytes held for the vector: bases and deltas.
  std::size_t state_bytes() const;

 private:
  void apply_total(const Chunk& c, std::span<double> x);
  void apply_delta(const Chunk& c, std::span<double> x);
  void apply_weight(std::int64_t sequence, double weight, double& w);

  std::uint64_t epoch_;
  std::vector<double> base_;                 // the base total of each chunk's elements
  std::vector<float> delta_;                 // the delta applied on top of it (0 after a base)
  std::vector<std::int64_t> sequence_;       // per chunk: the newest total or delta applied
  std::vector<std::int64_t> base_sequence_;  // per chunk: the round of the base held
  double applied_w_ = 0.0;
  std::int64_t weight_sequence_ = -1;
};

}  // namespace sgp::gossip
