#pragma once
// Who takes part in an asynchronous run, as one peer sees it: every rank's state and its
// incarnation (0 at start, +1 each time it rejoins). Notices about an older incarnation are
// stale and ignored; a newer incarnation can only come with an admission.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace sgp::gossip {

enum class PeerState : std::uint8_t {
  live = 0,      // mixes: receives pushes
  excluded = 1,  // declared dead or partitioned; its mass is gone
  done = 2,      // finished its iterations; keeps its mass, receives no more pushes
  left = 3,      // handed its mass to a neighbour and went away
};
std::string_view state_name(PeerState state);

class Membership {
 public:
  explicit Membership(int num_peers);

  int size() const { return static_cast<int>(states_.size()); }
  PeerState state(int rank) const { return states_[rank]; }
  std::uint32_t incarnation(int rank) const { return incarnations_[rank]; }
  bool live(int rank) const { return states_[rank] == PeerState::live; }
  std::vector<bool> live_flags() const;
  int live_count() const;

  // Applies a notice: (rank, incarnation) moves to `state`. An admission (state live) needs a
  // newer incarnation than known; other notices apply to the current incarnation of a live rank
  // (a done rank may still be marked left). Returns whether anything changed.
  bool apply(int rank, PeerState state, std::uint32_t incarnation);

  // The table as bytes (one u8 state and one u32 incarnation per rank), for admissions.
  std::vector<std::byte> encode() const;
  static std::optional<Membership> decode(std::span<const std::byte> bytes, int num_peers);

 private:
  std::vector<PeerState> states_;
  std::vector<std::uint32_t> incarnations_;
};

}  // namespace sgp::gossip
