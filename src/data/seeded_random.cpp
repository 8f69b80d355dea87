#include "sgp/data/seeded_random.hpp"

#include <cmath>
#include <numbers>

#include "sgp/error.hpp"

namespace sgp::data {

double SeededRandom::uniform() {
  return static_cast<double>(engine_() >> 11) * (1.0 / 9007199254740992.0);  // 2^-53
}

std::uint64_t SeededRandom::below(std::uint64_t n) {
  return static_cast<std::uint64_t>((static_cast<unsigned __int128>(engine_()) * n) >> 64);
}

double SeededRandom::normal() {
  const double u1 = 1.0 - uniform();  // in (0, 1]: log is finite
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

double SeededRandom::gamma(double shape) {
  SGP_ENFORCE(shape > 0.0 && std::isfinite(shape), "gamma shape must be positive, got {}", shape);
  if (shape < 1.0) {
    const double boosted = gamma(shape + 1.0);
    return boosted * std::pow(1.0 - uniform(), 1.0 / shape);
  }
  const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x = 0.0, v = 0.0;
    do {
      x = normal();
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = 1.0 - uniform();  // in (0, 1]
    if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
    if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
  }
}

}  // namespace sgp::data
