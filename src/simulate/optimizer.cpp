#include "sgp/simulate/optimizer.hpp"

#include <algorithm>

namespace sgp::simulate {

template <typename T>
PeerOptimizer<T>::PeerOptimizer(const OptimizerOptions& options, const QuadraticProblem& problem,
                                int peers, std::size_t dim, double lr, double noise, bool async)
    : options_(options), problem_(problem), dim_(dim), lr_(lr), noise_(noise), async_(async) {
  const auto values = static_cast<std::size_t>(peers) * dim;
  if (options.gradient_tracking) gradient_.assign(values, T(0));
  if (options.momentum > 0.0) buffer_.assign(values, T(0));
  if (options.momentum > 0.0 && options.momentum_kind == MomentumKind::quasi_global) {
    z_before_.assign(values, T(0));
  }
  if (options.slow_momentum) {
    z_prev_.assign(dim, 0.0);  // the quadratic workload starts every x at zero
    slow_buffer_.assign(dim, 0.0);
  }
}

template <typename T>
void PeerOptimizer<T>::start(int rank, std::span<T> row, std::span<const T> z) {
  if (!options_.gradient_tracking) return;
  auto g = slice(gradient_, rank);
  std::copy_n(z.begin(), dim_, g.begin());
  problem_.gradient(rank, 0, noise_, g.data());
  if (options_.momentum > 0.0) std::copy(g.begin(), g.end(), slice(buffer_, rank).begin());
  const auto u = tracked_direction(rank);
  std::copy(u.begin(), u.end(), row.begin() + static_cast<std::ptrdiff_t>(dim_));
}

template <typename T>
void PeerOptimizer<T>::step(int rank, std::int64_t round, std::span<T> row, double w,
                            std::span<const T> z, std::span<T> scratch) {
  const auto lr = static_cast<T>(lr_);
  if (options_.gradient_tracking) {  // x <- x - lr y (momentum is in what y tracks)
    for (std::size_t k = 0; k < dim_; ++k) row[k] -= lr * row[dim_ + k];
    return;
  }
  std::copy_n(z.begin(), dim_, scratch.begin());
  problem_.gradient(rank, round, noise_, scratch.data());
  const auto beta = static_cast<T>(options_.momentum);
  if (options_.momentum > 0.0 && options_.momentum_kind == MomentumKind::quasi_global) {
    // z_half = z - lr (g + beta m), written back as the numerator w z_half.
    auto m = slice(buffer_, rank);
    std::copy_n(z.begin(), dim_, slice(z_before_, rank).begin());
    for (std::size_t k = 0; k < dim_; ++k) {
      row[k] = static_cast<T>(w * static_cast<double>(z[k] - lr * (scratch[k] + beta * m[k])));
    }
    return;
  }
  if (options_.momentum > 0.0) {  // local heavy ball, as the peers' SGD: m <- beta m + g
    auto m = slice(buffer_, rank);
    for (std::size_t k = 0; k < dim_; ++k) scratch[k] = m[k] = beta * m[k] + scratch[k];
  }
  // SGP steps on the numerator; asgp steps in z, scaled by w.
  const auto scale = async_ ? static_cast<T>(w * lr_) : lr;
  for (std::size_t k = 0; k < dim_; ++k) row[k] -= scale * scratch[k];
}

template <typename T>
void PeerOptimizer<T>::after_mixing(int rank, std::int64_t round, std::span<T> row,
                                    std::span<const T> z) {
  if (options_.gradient_tracking) {  // y <- y + u(new z) - u(old z)
    const auto u = tracked_direction(rank);
    for (std::size_t k = 0; k < dim_; ++k) row[dim_ + k] -= u[k];
    auto g = slice(gradient_, rank);
    std::copy_n(z.begin(), dim_, g.begin());
    problem_.gradient(rank, round + 1, noise_, g.data());
    if (options_.momentum > 0.0) {  // momentum tracking: u = m <- beta m + g
      auto m = slice(buffer_, rank);
      const auto beta = static_cast<T>(options_.momentum);
      for (std::size_t k = 0; k < dim_; ++k) m[k] = beta * m[k] + g[k];
    }
    for (std::size_t k = 0; k < dim_; ++k) row[dim_ + k] += u[k];
  }
  if (options_.momentum > 0.0 && options_.momentum_kind == MomentumKind::quasi_global) {
    // m <- beta m + (1 - beta) (z_before - z_after) / lr  (Lin et al.'s damping)
    auto m = slice(buffer_, rank);
    const auto before = slice(z_before_, rank);
    const double beta = options_.momentum;
    for (std::size_t k = 0; k < dim_; ++k) {
      const double d = (static_cast<double>(before[k]) - static_cast<double>(z[k])) / lr_;
      m[k] = static_cast<T>(beta * static_cast<double>(m[k]) + (1.0 - beta) * d);
    }
  }
}

template <typename T>
std::vector<double> PeerOptimizer<T>::outer_step(std::vector<double> mean) {
  if (!options_.slow_momentum) return mean;
  const double beta = *options_.slow_momentum;
  for (std::size_t k = 0; k < dim_; ++k) {
    slow_buffer_[k] = beta * slow_buffer_[k] + (z_prev_[k] - mean[k]) / lr_;
    z_prev_[k] -= lr_ * slow_buffer_[k];
  }
  return z_prev_;
}

template class PeerOptimizer<float>;
template class PeerOptimizer<double>;

}  // namespace sgp::simulate
