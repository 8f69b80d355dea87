#pragma once
// Round bookkeeping of one receiver: which (sender, round, chunk) messages were accepted, which
// senders' messages and which rounds are complete, and why a message that passed the frame checks
// must still be refused (a sender that does not push to us then, a replay, a round already closed
// or too far ahead, a coefficient that disagrees with the schedule).
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "sgp/gossip/wire_format.hpp"
#include "sgp/topology/schedule.hpp"

namespace sgp::gossip {

class RoundTracker {
 public:
  // Every message is cut into `chunks` chunks.
  RoundTracker(const topology::Schedule& schedule, int self, std::int64_t max_rounds_ahead,
               std::uint32_t chunks);

  // Records the chunk and returns nothing, or returns why it is refused. `current` is the round
  // the receiver is mixing.
  std::optional<RejectCause> admit(int sender, std::int64_t round, std::uint32_t chunk,
                                   double coefficient, std::int64_t current);
  // Every chunk of `sender`'s message for `round` has been accepted.
  bool sender_complete(std::int64_t round, int sender) const;
  // Every in-neighbour's chunk `chunk` of `round` has been accepted.
  bool chunk_complete(std::int64_t round, std::uint32_t chunk) const;
  // Every in-neighbour's message of `round` is complete.
  bool complete(std::int64_t round) const;
  std::vector<int> missing(std::int64_t round) const;
  // Closes rounds floor()+1.. while they are complete and <= limit.
  void advance_floor(std::int64_t limit);
  // Every round <= floor() is complete (and its messages applied); -1 before round 0.
  std::int64_t floor() const { return floor_; }
  // Resuming from a checkpoint taken after `floor` rounds closed: nothing received yet.
  void restart_at(std::int64_t floor) {
    floor_ = floor;
    received_.clear();
  }

 private:
  static constexpr std::int64_t kHistory = 64;  // closed rounds remembered to name replays

  struct Arrived {
    std::vector<bool> chunks;
    std::uint32_t count = 0;
  };

  const topology::Schedule& schedule_;
  int self_;
  std::int64_t max_ahead_;
  std::uint32_t chunks_;
  std::int64_t floor_ = -1;
  std::map<std::int64_t, std::map<int, Arrived>> received_;  // round -> sender -> chunks
};

}  // namespace sgp::gossip
