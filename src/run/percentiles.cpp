#include "sgp/run/percentiles.hpp"

#include <algorithm>
#include <numeric>

namespace sgp::run {

Percentiles percentiles(std::vector<double> values, std::size_t skip) {
  if (values.size() > skip) values.erase(values.begin(), values.begin() + skip);
  if (values.empty()) return {};
  auto at = [&values](double q) {
    const auto k = static_cast<std::size_t>(q * static_cast<double>(values.size() - 1) + 0.5);
    std::nth_element(values.begin(), values.begin() + k, values.end());
    return values[k];
  };
  const double mean =
      std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  return {at(0.5), at(0.9), mean};
}

}  // namespace sgp::run
