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

// A peer's mass held as de-biased values (asgp's engine): element k's mass is w (z[k] + r[k]),
// with z in float32 (the caller trains on it) and r the part of the ratio below z's precision,
// so that mixing keeps float64's precision, not float32's: 8 processes under 5% drops ended
// 1.6e-7 from the exact mean without r, below 1e-9 with it. A push moves a share of w and
// leaves z and r as they are.
struct HeldMass {
  std::span<float> z;
  std::span<float> residual;  // r
  double& w;
};

// Adds mass dx to element k (z, r), the weight having gone from `before` to `after` (> 0;
// `inverse` is 1 / after: a multiplication where a division cost a tenth of asgp's round).
inline void take_mass(float& z, float& r, double before, double inverse, double dx) {
  const double ratio = (before * (static_cast<double>(z) + static_cast<double>(r)) + dx) * inverse;
  z = static_cast<float>(ratio);
  r = static_cast<float>(ratio - static_cast<double>(z));
}

// The window of kDeltaWindowRounds rounds a round belongs to (floor division: a hostile
// header's negative round falls in a window of its own).
std::int64_t delta_window(std::int64_t round);

// One send buffer: a snapshot of the edge's total (dtype 2) or of its delta from the base
// (dtype 6), on the wire until every chunk is released.
struct SendBuffer {
  std::uint16_t dtype = kDtypeFloat64Total;
  // dtype 2: the edge's base itself (OutEdge::fill_total copies it only when the next base is
  // due while this one is still on the wire), or without running sums what was pushed since.
  std::shared_ptr<const std::vector<double>> totals;
  std::vector<float> deltas;  // dtype 6
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
  // total += coefficient * the mass `held` (asgp's engine keeps z, not x = w z).
  void push_z(double coefficient, const HeldMass& held);
  // push_z() then snapshot(), in one pass over the vectors when the snapshot is a delta (a
  // round's usual send).
  std::shared_ptr<SendBuffer> push_z_and_snapshot(double coefficient, const HeldMass& held,
                                                  bool exact, std::int64_t round, int chunks,
                                                  double& weight_out);
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
  // The total is base_ + since_base_: a push adds to since_base_ alone, whose float32 rounding is
  // the delta sent (a round's usual push reads and writes 8 bytes per element fewer than with the
  // total and the base apart); a base folds it into base_. Without running sums base_ stays 0.
  std::shared_ptr<std::vector<double>> base_;  // the total this edge last sent as a base
  std::vector<double> since_base_;
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
  bad_weight,  // apply_to_z: a weight that would leave w <= 0 (RejectCause::bad_weight)
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
  // The same mass taken into de-biased values (asgp's engine): w (z + r) + dx at w + dw, in one
  // pass (take_mass). The chunk must cover all of z (one chunk per total), so that values and
  // weight change together.
  Applied apply_to_z(bool running_sums, const Chunk& chunk, const HeldMass& held);
  // Bytes held for the vector: bases and deltas.
  std::size_t state_bytes() const;

 private:
  // Whether a running-sums chunk is new and applicable (Applied::yes) or what else it is.
  Applied admit(const Chunk& c) const;
  // Calls take(k, dx) with each element's mass to add (its index in the chunk and the change
  // in double) and makes the chunk's total or delta the one applied.
  template <class Take>
  void take_change(const Chunk& c, Take take);
  // take_change() into z (apply_to_z), in the vector loops of the round's hot path.
  void take_change_into_z(const Chunk& c, const HeldMass& held, double before, double after);
  // Makes the chunk's total or delta the one applied.
  void record(const Chunk& c);
  double weight_change(std::int64_t sequence, double weight) const;
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
