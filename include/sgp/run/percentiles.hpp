#pragma once
// Summary statistics of per-iteration times, for the summaries of peers and runs.
#include <cstddef>
#include <vector>

namespace sgp::run {

// Median, 90th percentile and mean of `values` (copied), ignoring the first `skip` entries.
struct Percentiles {
  double median = 0.0, p90 = 0.0, mean = 0.0;
};
Percentiles percentiles(std::vector<double> values, std::size_t skip);

}  // namespace sgp::run
