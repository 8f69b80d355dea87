#include "round_tracker.hpp"

#include <algorithm>
#include <cmath>

namespace sgp::gossip {

RoundTracker::RoundTracker(const topology::Schedule& schedule, int self,
                           std::int64_t max_rounds_ahead)
    : schedule_(schedule), self_(self), max_ahead_(max_rounds_ahead) {}

std::optional<RejectCause> RoundTracker::admit(int sender, std::int64_t round, double coefficient,
                                               std::int64_t current) {
  if (round < 0) return RejectCause::stale_round;
  if (round > current + max_ahead_) return RejectCause::future_round;
  const double expected = schedule_.push_weight(sender, self_, round);
  if (expected < 0) return RejectCause::unexpected_sender;
  auto& senders = received_[round];
  if (std::find(senders.begin(), senders.end(), sender) != senders.end()) {
    return RejectCause::duplicate_round;
  }
  if (round <= floor_) {
    if (senders.empty()) received_.erase(round);
    return RejectCause::stale_round;
  }
  if (std::abs(coefficient - expected) > 1e-12 * std::max(1.0, expected)) {
    if (senders.empty()) received_.erase(round);
    return RejectCause::bad_coefficient;
  }
  senders.push_back(sender);
  return std::nullopt;
}

bool RoundTracker::complete(std::int64_t round) const { return missing(round).empty(); }

std::vector<int> RoundTracker::missing(std::int64_t round) const {
  std::vector<int> out;
  auto it = received_.find(round);
  for (int peer : schedule_.in_neighbors(self_, round)) {
    if (it == received_.end() ||
        std::find(it->second.begin(), it->second.end(), peer) == it->second.end()) {
      out.push_back(peer);
    }
  }
  return out;
}

void RoundTracker::advance_floor(std::int64_t limit) {
  while (floor_ + 1 <= limit && complete(floor_ + 1)) ++floor_;
  received_.erase(received_.begin(), received_.lower_bound(floor_ - kHistory));
}

}  // namespace sgp::gossip
