#include "sgp/simulate/workload.hpp"

#include "sgp/data/seeded_random.hpp"

#include <cmath>

namespace sgp::simulate {
namespace {

using data::splitmix64;

// Uniform in [lo, hi) from a hash of (seed, stream, index).
double uniform(std::uint64_t seed, std::uint64_t stream, std::uint64_t index, double lo,
               double hi) {
  const std::uint64_t bits =
      splitmix64(splitmix64(seed ^ (stream * 0x9e3779b97f4a7c15ull)) + index);
  return lo + (hi - lo) * (static_cast<double>(bits >> 11) * 0x1.0p-53);
}

}  // namespace

QuadraticProblem::QuadraticProblem(std::uint64_t seed, int peers, std::size_t dim, double spread)
    : seed_(seed), dim_(dim), h_(static_cast<std::size_t>(peers)), b_(h_.size()), a_(dim), v_(dim) {
  for (std::size_t i = 0; i < h_.size(); ++i) {
    h_[i] = uniform(seed, 1, i, 0.5, 2.0);
    b_[i] = spread * uniform(seed, 2, i, -1.0, 1.0);
  }
  for (std::size_t k = 0; k < dim; ++k) {
    a_[k] = uniform(seed, 3, k, -1.0, 1.0);
    v_[k] = uniform(seed, 4, k, -1.0, 1.0);
  }
  set_live(std::vector<bool>(h_.size(), true));
}

void QuadraticProblem::set_live(const std::vector<bool>& live) {
  double sum_h = 0.0, sum_hb = 0.0;
  int count = 0;
  for (std::size_t i = 0; i < h_.size(); ++i) {
    if (!live[i]) continue;
    sum_h += h_[i];
    sum_hb += h_[i] * b_[i];
    ++count;
  }
  mean_h_ = sum_h / static_cast<double>(count);
  optimum_.resize(dim_);
  for (std::size_t k = 0; k < dim_; ++k) optimum_[k] = a_[k] + sum_hb / sum_h * v_[k];
}

double QuadraticProblem::gap(const double* theta) const {
  double s = 0.0;
  for (std::size_t k = 0; k < dim_; ++k) s += (theta[k] - optimum_[k]) * (theta[k] - optimum_[k]);
  return 0.5 * mean_h_ * s;
}

template <typename T>
void QuadraticProblem::gradient(int rank, std::int64_t round, double noise, T* z) const {
  const auto i = static_cast<std::size_t>(rank);
  const double h = h_[i], b = b_[i];
  // Uniform on [-sqrt(3), sqrt(3)): variance 1.
  const double amplitude = noise * std::sqrt(3.0);
  std::uint64_t state =
      splitmix64(seed_ ^ splitmix64(static_cast<std::uint64_t>(round) * 0x100000001b3ull + i));
  for (std::size_t k = 0; k < dim_; ++k) {
    double g = h * (static_cast<double>(z[k]) - a_[k] - b * v_[k]);
    if (noise > 0.0) {
      state = splitmix64(state);
      g += amplitude * (2.0 * (static_cast<double>(state >> 11) * 0x1.0p-53) - 1.0);
    }
    z[k] = static_cast<T>(g);
  }
}

template void QuadraticProblem::gradient<float>(int, std::int64_t, double, float*) const;
template void QuadraticProblem::gradient<double>(int, std::int64_t, double, double*) const;

}  // namespace sgp::simulate
