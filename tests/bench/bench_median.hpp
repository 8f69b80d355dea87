// The median the benchmarks print: of an odd count the middle value, of an even count the upper
// of the two middle ones (a measured time, not an average of two).
#pragma once

#include <algorithm>
#include <vector>

namespace sgp::bench {

inline double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

}  // namespace sgp::bench
