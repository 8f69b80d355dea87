#pragma once
// Round bookkeeping of one receiver: which (sender, round) messages were accepted, which rounds
// are complete, and why a message that passed the frame checks must still be refused (a sender
// that does not push to us then, a replay, a round already closed or too far ahead, a
// coefficient that disagrees with the schedule).
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "sgp/gossip/wire_format.hpp"
#include "sgp/topology/schedule.hpp"

namespace sgp::gossip {

class RoundTracker {
 public:
  RoundTracker(const topology::Schedule& schedule, int self, std::int64_t max_rounds_ahead);

  // Records the message and returns nothing, or returns why it is refused. `current` is the
  // round the receiver is mixing.
  std::optional<RejectCause> admit(int sender, std::int64_t round, double coefficient,
                                   std::int64_t current);
  // Every in-neighbour's message of `round` has been accepted.
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

  const topology::Schedule& schedule_;
  int self_;
  std::int64_t max_ahead_;
  std::int64_t floor_ = -1;
  std::map<std::int64_t, std::vector<int>> received_;  // round -> senders accepted
};

}  // namespace sgp::gossip
