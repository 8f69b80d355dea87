#include "sgp/gossip/neighbour_watch.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>

#include "sgp/error.hpp"
#include "sgp/topology/schedule.hpp"

namespace sgp::gossip {
namespace {

// The lower median: the ceil(n / 2)-th smallest value (n > 0).
double lower_median(std::vector<double> values) {
  const auto middle = values.begin() + static_cast<std::ptrdiff_t>((values.size() - 1) / 2);
  std::nth_element(values.begin(), middle, values.end());
  return *middle;
}

}  // namespace

void NeighbourWatch::record(int phase, int sender, double distance) {
  auto& window = window_[{phase, sender}];
  window.push_back(distance);
  if (window.size() > kWindow) window.pop_front();
}

std::optional<double> NeighbourWatch::typical(const Key& key, std::size_t min_samples) const {
  const auto it = window_.find(key);
  if (it == window_.end() || it->second.size() < min_samples) return std::nullopt;
  return lower_median({it->second.begin(), it->second.end()});
}

bool NeighbourWatch::suspected(int rank) const {
  return std::any_of(suspects_.begin(), suspects_.end(),
                     [rank](const SuspectedNeighbour& s) { return s.rank == rank; });
}

bool NeighbourWatch::end_round(std::int64_t round, double own_norm) {
  bool named = false;
  for (const auto& [key, window] : window_) {
    const auto [phase, rank] = key;
    if (suspected(rank)) continue;
    const auto mine = typical(key, kMinSamples);
    if (!mine) continue;
    std::vector<double> others;
    for (const auto& entry : window_) {
      if (entry.first.first != phase || entry.first == key) continue;
      if (auto t = typical(entry.first, kMinSamples)) others.push_back(*t);
    }
    if (others.empty()) continue;
    const double reference = lower_median(others);
    if (*mine <= kSuspectFactor * reference || *mine <= kMinRelativeDistance * own_norm) continue;
    suspects_.push_back({rank, round, *mine, reference, own_norm});
    named = true;
    spdlog::warn(
        "rank {}: in-neighbour {} is suspected of being malicious or faulty: over its last {} "
        "messages its model was a median {:.4g} from ours, {:.1f}x the {:.4g} of our other "
        "in-neighbours (our model's norm: {:.4g}; round {}); {}",
        self_, rank, window.size(), *mine, *mine / std::max(reference, 1e-300), reference, own_norm,
        round,
        robust_ == Robust::clip
            ? "its contributions are clipped (--robust clip)"
            : "its contributions are mixed in unchanged: rerun with --robust clip to defend");
  }
  return named;
}

namespace {

constexpr std::size_t kLanes = 8;  // independent sums: the compiler keeps them in one vector

// sum over i < n of (a[i] * sa - b[i] * sb)^2, in float lanes added up in double.
double squared_difference(const float* a, float sa, const float* b, float sb, std::size_t n) {
  std::array<float, kLanes> lanes{};
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (std::size_t l = 0; l < kLanes; ++l) {
      const float d = a[i + l] * sa - b[i + l] * sb;
      lanes[l] += d * d;
    }
  }
  double sum = 0.0;
  for (float lane : lanes) sum += lane;
  for (; i < n; ++i) {
    const double d = a[i] * sa - b[i] * sb;
    sum += d * d;
  }
  return sum;
}

}  // namespace

double add_squared_distances(const float* x, double w, std::size_t n, std::span<const Share> shares,
                             std::span<const double> sender_w, std::span<double> squared) {
  constexpr std::size_t kBlock = 2048;  // 8 KiB of x, which stays in L1 between the passes
  const auto inv_w = static_cast<float>(1.0 / w);
  double own = 0.0;
  for (std::size_t begin = 0; begin < n; begin += kBlock) {
    const std::size_t count = std::min(n, begin + kBlock) - begin;
    own += squared_difference(x + begin, inv_w, x + begin, 0.0f, count);
    for (std::size_t k = 0; k < shares.size(); ++k) {
      squared[k] +=
          squared_difference(shares[k].sender_x + begin, static_cast<float>(1.0 / sender_w[k]),
                             x + begin, inv_w, count);
    }
  }
  return own;
}

void check_robust(const topology::Schedule& schedule, int rank, Robust robust) {
  const auto heard = schedule.all_in_neighbors(rank).size();
  if (robust == Robust::clip && heard < 2) {
    throw InputError(fmt::format(
        "--robust clip: rank {} has {} in-neighbour(s) in the topology; clipping needs at least "
        "two to tell a poisoned model from an honest one (use a topology where every rank hears "
        "from two or more peers)",
        rank, heard));
  }
}

double NeighbourWatch::clip_radius() const {
  std::map<int, std::vector<double>> by_sender;  // its phases' typical distances
  for (const auto& entry : window_) {
    if (auto t = typical(entry.first, 1)) by_sender[entry.first.second].push_back(*t);
  }
  std::vector<double> typicals;
  for (auto& [sender, values] : by_sender) typicals.push_back(lower_median(std::move(values)));
  if (typicals.size() < 2) return 0.0;
  return kClipFactor * lower_median(std::move(typicals));
}

}  // namespace sgp::gossip
