#pragma once
// Byte buffers for transport tests: a recognisable pattern per seed, and exact comparison.
#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

namespace sgp::testing {

inline std::vector<std::byte> bytes_of(std::size_t n, int seed) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = std::byte(static_cast<unsigned>((i * 131 + seed) & 0xff));
  return v;
}

inline bool same(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

}  // namespace sgp::testing
