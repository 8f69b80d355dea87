#pragma once
// The sums behind a RoundRecord, over every peer and coordinate, in parallel over ranges of
// coordinates (each block of coordinates is read twice while it is in cache: zbar, then the
// deviations from it).
#include <cstddef>
#include <vector>

#include "sgp/simulate/peer_pool.hpp"

namespace sgp::simulate {

struct RoundSums {
  int live = 0;
  double sum_w = 0.0;
  double consensus = 0.0;    // sum_i ||z_i - zbar||^2
  double zbar2 = 0.0;        // ||zbar||^2
  double target = 0.0;       // sum_i ||z_i - t||^2
  double target2 = 0.0;      // ||t||^2
  double deviation = 0.0;    // ||x - t w||^2
  double zbar_target = 0.0;  // ||zbar - t||^2
};

// x: rank-major rows of `stride` values (x first: dim values; a tracker may follow); only the
// live peers count (live[i]).
template <typename T>
RoundSums round_sums(PeerPool& pool, const T* x, std::size_t stride, const std::vector<double>& w,
                     const std::vector<bool>& live, std::size_t dim,
                     const std::vector<double>& target);

}  // namespace sgp::simulate
