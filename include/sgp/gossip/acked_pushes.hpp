#pragma once
// The two ends of one directed edge of asgp with acknowledged pushes (--acked-pushes), the
// alternative to running sums (running_sums.hpp) that keeps no per-edge copy of the model.
//
// A push moves a share of the sender's mass into a float32 vector (wire dtype 8): m = round32(s
// w (z + r)) with weight s w. The sender takes exactly m out of its own mass in the same pass
// (take_mass with -m, so the rounding of m stays with the sender), and keeps the push until the
// receiver acknowledges it (control notice push_ack); an unacknowledged push is sent again, with
// its sequence number (the sender's round), and the receiver applies each sequence number once.
// So a lost, duplicated or reordered message costs no mass, as with running sums, and the mass
// is exact to float64 rounding (docs/asynchronous.md, "Acknowledged pushes").
//
// State: the sender holds at most kMaxUnacked pushes per edge (4 bytes per element each, freed
// when acknowledged), the receiver the sequence numbers it applied last. Running sums hold, per
// element, 16 bytes at the sender (a float64 base and what it pushed since) and 12 at the
// receiver (the base and the float32 delta applied), whatever is in flight.
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "sgp/gossip/running_sums.hpp"

namespace sgp::gossip {

// How a receiver tells a repeat from a push it has not applied with a few sequence numbers: the
// sender makes push k of an edge only once pushes 0 .. k - kAckWindow are acknowledged, and the
// receiver remembers the kAckWindow newest sequence numbers it applied. A push older than all of
// them is older than a push made after its own acknowledgement: a repeat.
inline constexpr std::size_t kAckWindow = 8;

// One push, held by its sender until acknowledged.
struct AckedPush {
  std::int64_t sequence = 0;  // the sender's round when it pushed
  std::uint64_t index = 0;    // pushes on the edge before it
  double weight = 0.0;        // the share of w it carries
  // The share of w (z + r), rounded to float32 (wire dtype 8), or in float64 (dtype 9) when
  // pushed `precise`: one of the two, `size` elements, not zero-filled first (the push's pass
  // writes every element; a value-initialised vector cost one more write of it).
  std::size_t size = 0;
  std::unique_ptr<float[]> mass;
  std::unique_ptr<double[]> mass64;
  std::chrono::steady_clock::time_point sent_at;  // its last (re)send
  std::atomic<int> chunks_on_wire{0};
  std::uint16_t dtype() const { return mass64 ? kDtypeFloat64Mass : kDtypeFloat32Mass; }
  double at(std::size_t k) const { return mass64 ? mass64[k] : mass[k]; }
  std::span<const std::byte> payload() const;
};

class AckedOutEdge {
 public:
  static constexpr std::size_t kMaxUnacked = 2;
  AckedOutEdge(std::size_t n, std::uint64_t epoch) : n_(n), epoch_(epoch) {}
  std::uint64_t epoch() const { return epoch_; }
  // Moves weight `share` (0 < share < held.w) of the held mass, share (z + r), into a new push
  // made at `round`, in float64 if `precise`, or returns nullptr (nothing moves) when
  // kMaxUnacked pushes, or one made kAckWindow pushes ago, still await their acknowledgement.
  std::shared_ptr<AckedPush> push(double share, const HeldMass& held, std::int64_t round,
                                  bool precise = false);
  // The receiver applied push `sequence`: it is dropped. False if no such push is held.
  bool acknowledge(std::int64_t sequence);
  // Unacknowledged pushes that the transport no longer holds, last sent `after` or longer
  // before `now`: to send again (at most one copy of a push is ever on the wire).
  std::vector<std::shared_ptr<AckedPush>> due_again(
      std::chrono::steady_clock::time_point now, std::chrono::steady_clock::duration after) const;
  // Whether the transport still holds one of this edge's pushes.
  bool on_wire() const;
  // Bytes held for the vector: the unacknowledged pushes.
  std::size_t state_bytes() const;

 private:
  std::size_t n_;
  std::uint64_t epoch_;
  std::vector<std::shared_ptr<AckedPush>> pushes_;  // oldest first
  std::uint64_t made_ = 0;                          // pushes made on the edge
};

class AckedInEdge {
 public:
  explicit AckedInEdge(std::uint64_t epoch) : epoch_(epoch) {}
  std::uint64_t epoch() const { return epoch_; }
  // Adds push `sequence` (mass m, weight dw; a payload of dtype 8 or 9) to the held mass,
  // w (z + r) + m at w + dw, unless it was applied before: Applied::repeat (acknowledge it
  // again: the first ack was lost).
  Applied apply(std::int64_t sequence, std::uint16_t dtype, std::span<const std::byte> mass,
                double weight, const HeldMass& held);

 private:
  // Whether `sequence` was applied (kAckWindow).
  bool applied(std::int64_t sequence) const;

  std::uint64_t epoch_;
  std::array<std::int64_t, kAckWindow> recent_{};  // the newest sequence numbers applied
  std::size_t count_ = 0;                          // how many of them (at most kAckWindow)
};

}  // namespace sgp::gossip
