#include "failure_detector.hpp"

#include <algorithm>
#include <cmath>

namespace sgp::gossip {

FailureDetector::FailureDetector(int num_peers, std::chrono::milliseconds floor,
                                 std::chrono::milliseconds cap)
    : peers_(num_peers), floor_(floor), cap_(cap) {}

void FailureDetector::watch(int rank, Clock::time_point now) {
  peers_[rank] = Peer{};
  peers_[rank].watched = true;
  peers_[rank].last = now;
}

void FailureDetector::unwatch(int rank) { peers_[rank].watched = false; }

void FailureDetector::heard(int rank, Clock::time_point now) {
  Peer& p = peers_[rank];
  if (p.heard_once) {
    // Jacobson's estimator (RFC 6298): gains 1/8 for the mean, 1/4 for the deviation.
    const double gap = std::chrono::duration<double>(now - p.last).count();
    const double error = gap - p.mean_gap;
    p.mean_gap += error / 8.0;
    p.deviation += (std::abs(error) - p.deviation) / 4.0;
  }
  p.heard_once = true;
  p.last = now;
}

std::chrono::milliseconds FailureDetector::deadline(int rank) const {
  const Peer& p = peers_[rank];
  if (!p.heard_once) return cap_;
  const auto learnt = std::chrono::milliseconds(
      static_cast<long long>(std::ceil(1e3 * (p.mean_gap + 4.0 * p.deviation))));
  return std::clamp(learnt, floor_, cap_);
}

std::vector<int> FailureDetector::overdue(Clock::time_point now) const {
  std::vector<int> out;
  for (int r = 0; r < static_cast<int>(peers_.size()); ++r) {
    if (peers_[r].watched && now - peers_[r].last > deadline(r)) out.push_back(r);
  }
  return out;
}

bool FailureDetector::any_quiet(Clock::time_point now, std::chrono::milliseconds at_least) const {
  for (const Peer& p : peers_) {
    if (!p.watched) continue;
    const double usual = p.heard_once ? p.mean_gap + 4.0 * p.deviation : 0.0;
    const double silent = std::chrono::duration<double>(now - p.last).count();
    if (silent > std::max(usual, std::chrono::duration<double>(at_least).count())) return true;
  }
  return false;
}

bool FailureDetector::waiting_for_first_message(const std::vector<int>& ranks) const {
  return std::any_of(ranks.begin(), ranks.end(),
                     [this](int r) { return peers_[r].watched && !peers_[r].heard_once; });
}

}  // namespace sgp::gossip
