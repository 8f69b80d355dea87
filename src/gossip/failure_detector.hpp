#pragma once
// When is a silent peer dead? An adaptive deadline per watched peer, learnt from the gaps
// between its messages the way TCP learns its retransmission timeout: a smoothed mean gap and
// mean deviation, deadline = mean + 4 deviations, never below `floor` (scheduling hiccups on a
// busy host) and never above `cap` (the user's --timeout-ms). Before a peer's first message its
// deadline is the cap: peers start at different times.
#include <chrono>
#include <vector>

namespace sgp::gossip {

class FailureDetector {
 public:
  using Clock = std::chrono::steady_clock;

  FailureDetector(int num_peers, std::chrono::milliseconds floor, std::chrono::milliseconds cap);

  // Start (or restart, e.g. a peer that rejoined) expecting messages from `rank`.
  void watch(int rank, Clock::time_point now);
  void unwatch(int rank);
  bool watched(int rank) const { return peers_[rank].watched; }
  // Whether some watched peer of `ranks` has not sent anything yet.
  bool waiting_for_first_message(const std::vector<int>& ranks) const;
  void heard(int rank, Clock::time_point now);
  // The watched ranks silent for longer than their deadline.
  std::vector<int> overdue(Clock::time_point now) const;
  std::chrono::milliseconds deadline(int rank) const;
  // Whether some watched peer has been silent for longer than its usual gap (mean + 4
  // deviations, unfloored) and longer than `at_least`, or has not been heard from for that long
  // since it was first watched: not yet overdue, but maybe dead (finish(): do not stop mixing).
  bool any_quiet(Clock::time_point now, std::chrono::milliseconds at_least) const;

 private:
  struct Peer {
    bool watched = false;
    bool heard_once = false;
    Clock::time_point last;
    double mean_gap = 0.0, deviation = 0.0;  // seconds
  };
  std::vector<Peer> peers_;
  std::chrono::milliseconds floor_, cap_;
};

}  // namespace sgp::gossip
