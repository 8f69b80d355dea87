#pragma once
// What a push-sum peer learns about its in-neighbours from the distances of their models to its
// own: detection of a neighbour whose contributions are persistently far outside the others'
// (every run of the sync engine on the host), and the clipping radius of --robust clip
// (ClippedGossip, He, Karimireddy and Jaggi 2022).
//
// The distance of in-neighbour j's round-r message is ||z_j - z_i||: the de-biased model it sent
// (x_j / w_j) against this peer's own before the round (x_i / w_i).
//
// Detection compares in-neighbours heard in the same phase of the schedule, never across phases:
// on a time-varying schedule a neighbour heard early in a period is honestly much further than
// one heard late (Base-(k+1) on skewed data: 4-6x, up to 84% of the model's norm, W1, N = 25,
// dirichlet:0.1). Each (phase, neighbour) keeps its last kWindow distances; its "typical
// distance" is their median. Once it has kMinSamples, a neighbour is suspected when its typical
// distance exceeds kSuspectFactor times the median of the typical distances of the other
// in-neighbours of that phase (those with kMinSamples too) and kMinRelativeDistance times this
// peer's own model norm. A phase with a single in-neighbour (every round of a one-peer schedule)
// has nobody to compare with and suspects nobody. A suspicion stays for the rest of the run; it is
// logged once, naming the rank and the figures.
//
// Clipping radius: kClipFactor times the lower median of the in-neighbours' typical distances
// (a neighbour heard in several phases: the lower median of its phases'; this round's distances
// included), so that it comes from an honest neighbour while at most
// half of them are not; 0 (every contribution clipped to this peer's own model, weights still
// mixed) until two in-neighbours have been heard, so that an attacker heard first cannot set it.
// A suspected neighbour's contributions are clipped to radius 0 (PushSumEngine): where it holds
// half of a peer's in-weight (one of two in-neighbours), clipping alone would let it pull the
// peer by half the radius every round it is heard, always the same way.
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "sgp/gossip/push_sum_arithmetic.hpp"
#include "sgp/gossip/push_sum_config.hpp"

namespace sgp::topology {
class Schedule;
}

namespace sgp::gossip {

class NeighbourWatch {
 public:
  static constexpr std::size_t kWindow = 16;
  static constexpr std::size_t kMinSamples = 4;
  static constexpr double kSuspectFactor = 4.0;
  static constexpr double kMinRelativeDistance = 1e-2;
  static constexpr double kClipFactor = 2.0;

  // self: this peer's rank (for the log); robust: whether its contributions are clipped (for the
  // log line's advice).
  NeighbourWatch(int self, Robust robust) : self_(self), robust_(robust) {}

  // The distance of `sender`'s message of the round being mixed, in the schedule's `phase`.
  void record(int phase, int sender, double distance);
  // After the round's distances were recorded: this peer's own ||z_i|| before the round; checks
  // every neighbour and logs a new suspect. Returns whether a new one was named.
  bool end_round(std::int64_t round, double own_norm);
  // The clipping radius for the round whose distances were just recorded (see above).
  double clip_radius() const;
  const std::vector<SuspectedNeighbour>& suspects() const { return suspects_; }
  bool suspected(int rank) const;

 private:
  using Key = std::pair<int, int>;  // (phase, in-neighbour)
  std::optional<double> typical(const Key& key, std::size_t min_samples) const;

  int self_;
  Robust robust_;
  std::map<Key, std::deque<double>> window_;  // its latest distances
  std::vector<SuspectedNeighbour> suspects_;
};

// InputError "--robust clip: ..." when `robust` is clip and `rank` hears from fewer than two
// peers over the schedule's phases: clipping could not tell a poisoned model from an honest one.
void check_robust(const topology::Schedule& schedule, int rank, Robust robust);

// Over n elements (host memory): adds to squared[k] ||shares[k].sender_x / sender_w[k] - x / w||^2
// and returns ||x / w||^2. It reads what the axpy of the shares reads; float differences, double
// sums per block.
double add_squared_distances(const float* x, double w, std::size_t n, std::span<const Share> shares,
                             std::span<const double> sender_w, std::span<double> squared);

}  // namespace sgp::gossip
