#include "round_tracker.hpp"

#include <algorithm>
#include <cmath>

namespace sgp::gossip {

RoundTracker::RoundTracker(const topology::Schedule& schedule, int self,
                           std::int64_t max_rounds_ahead, std::uint32_t chunks)
    : schedule_(schedule), self_(self), max_ahead_(max_rounds_ahead), chunks_(chunks) {}

std::optional<RejectCause> RoundTracker::admit(int sender, std::int64_t round, std::uint32_t chunk,
                                               double coefficient, std::int64_t current) {
  if (round < 0) return RejectCause::stale_round;
  if (round > current + max_ahead_) return RejectCause::future_round;
  const double expected = schedule_.push_weight(sender, self_, round);
  if (expected < 0) return RejectCause::unexpected_sender;
  auto round_it = received_.find(round);
  if (round_it != received_.end()) {
    auto it = round_it->second.find(sender);
    if (it != round_it->second.end() && it->second.chunks[chunk]) {
      return RejectCause::duplicate_round;
    }
  }
  if (round <= floor_) return RejectCause::stale_round;
  if (std::abs(coefficient - expected) > 1e-12 * std::max(1.0, expected)) {
    return RejectCause::bad_coefficient;
  }
  auto& arrived = received_[round][sender];
  if (arrived.chunks.empty()) arrived.chunks.assign(chunks_, false);
  arrived.chunks[chunk] = true;
  ++arrived.count;
  return std::nullopt;
}

bool RoundTracker::sender_complete(std::int64_t round, int sender) const {
  auto round_it = received_.find(round);
  if (round_it == received_.end()) return false;
  auto it = round_it->second.find(sender);
  return it != round_it->second.end() && it->second.count == chunks_;
}

bool RoundTracker::chunk_complete(std::int64_t round, std::uint32_t chunk) const {
  const auto round_it = received_.find(round);
  for (int peer : schedule_.in_neighbors(self_, round)) {
    if (round_it == received_.end()) return false;
    const auto it = round_it->second.find(peer);
    if (it == round_it->second.end() || !it->second.chunks[chunk]) return false;
  }
  return true;
}

bool RoundTracker::complete(std::int64_t round) const { return missing(round).empty(); }

std::vector<int> RoundTracker::missing(std::int64_t round) const {
  std::vector<int> out;
  for (int peer : schedule_.in_neighbors(self_, round)) {
    if (!sender_complete(round, peer)) out.push_back(peer);
  }
  return out;
}

void RoundTracker::advance_floor(std::int64_t limit) {
  while (floor_ + 1 <= limit && complete(floor_ + 1)) ++floor_;
  received_.erase(received_.begin(), received_.lower_bound(floor_ - kHistory));
}

}  // namespace sgp::gossip
