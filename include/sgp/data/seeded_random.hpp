#pragma once
// Random numbers that are the same on every platform: mt19937_64 (fully specified by the
// standard) and our own transformations of its output, since <random>'s distributions differ
// between standard libraries. Only std::log, std::sqrt, std::cos and std::pow come from the
// platform (correctly rounded or nearly so everywhere; a last-bit difference could only move a
// value that lies exactly on a rounding boundary).
#include <cstdint>
#include <random>

namespace sgp::data {

// One stateless 64-bit mix (SplitMix64's output function, Steele, Lea & Flood 2014): a
// seeded value from any key, e.g. a seed and an index, without a generator's state.
inline std::uint64_t splitmix64(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

class SeededRandom {
 public:
  explicit SeededRandom(std::uint64_t seed) : engine_(seed) {}

  std::uint64_t bits() { return engine_(); }
  // Uniform in [0, 1) from the top 53 bits.
  double uniform();
  // Uniform in [0, n): multiply-shift range reduction (bias negligible for n << 2^64).
  std::uint64_t below(std::uint64_t n);
  // Standard normal, Box-Muller (one value per call; the second is discarded for simplicity).
  double normal();
  // Gamma(shape, 1), shape > 0: Marsaglia and Tsang (2000) for shape >= 1; for shape < 1,
  // Gamma(shape) = Gamma(shape + 1) * U^(1 / shape).
  double gamma(double shape);

 private:
  std::mt19937_64 engine_;
};

}  // namespace sgp::data
