#include "sgp/topology/iterative_rate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace sgp::topology {

namespace {

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

// x - mean(x) 1: the projection I - J.
void remove_mean(std::vector<double>& x) {
  double mean = 0.0;
  for (double v : x) mean += v;
  mean /= static_cast<double>(x.size());
  for (double& v : x) v -= mean;
}

// C v = (I - J) A^T A (I - J) v.
std::vector<double> apply_c(const Schedule& schedule, std::vector<double> v) {
  remove_mean(v);
  auto w = apply_period_transposed(schedule, apply_period(schedule, v));
  remove_mean(w);
  return w;
}

// The number of eigenvalues of the symmetric tridiagonal matrix (alpha, beta) below x (Sturm).
int eigenvalues_below(const std::vector<double>& alpha, const std::vector<double>& beta, double x) {
  int count = 0;
  double d = 1.0;
  for (std::size_t i = 0; i < alpha.size(); ++i) {
    const double off = i > 0 ? beta[i - 1] * beta[i - 1] : 0.0;
    d = alpha[i] - x - (i > 0 ? off / d : 0.0);
    if (d == 0.0) d = -1e-300;
    if (d < 0.0) ++count;
  }
  return count;
}

// The largest eigenvalue of the tridiagonal matrix, by bisection inside its Gershgorin bounds.
double largest_eigenvalue(const std::vector<double>& alpha, const std::vector<double>& beta) {
  double low = alpha[0], high = alpha[0];
  for (std::size_t i = 0; i < alpha.size(); ++i) {
    const double radius =
        (i > 0 ? std::abs(beta[i - 1]) : 0.0) + (i + 1 < alpha.size() ? std::abs(beta[i]) : 0.0);
    low = std::min(low, alpha[i] - radius);
    high = std::max(high, alpha[i] + radius);
  }
  const int n = static_cast<int>(alpha.size());
  for (int step = 0; step < 200 && high - low > 1e-17 * std::max(1.0, std::abs(high)); ++step) {
    const double mid = 0.5 * (low + high);
    (eigenvalues_below(alpha, beta, mid) == n ? high : low) = mid;
  }
  return high;
}

// A fixed pseudo-random start (splitmix64): the same sigma on every run.
std::vector<double> start_vector(int n) {
  std::vector<double> v(n);
  std::uint64_t state = 0x5347503339ull;
  for (double& x : v) {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    x = static_cast<double>((z ^ (z >> 31)) >> 11) / 9007199254740992.0 - 0.5;
  }
  remove_mean(v);
  return v;
}

}  // namespace

std::vector<double> apply_period(const Schedule& schedule, const std::vector<double>& x) {
  std::vector<double> in = x, out(x.size());
  for (int phase = 0; phase < schedule.period(); ++phase) {
    for (int i = 0; i < schedule.num_peers(); ++i) {
      out[i] += schedule.self_weight(i, phase) * in[i];
      for (const Push& push : schedule.out_edges(i, phase)) out[push.peer] += push.weight * in[i];
    }
    std::swap(in, out);
    std::fill(out.begin(), out.end(), 0.0);
  }
  return in;
}

std::vector<double> apply_period_transposed(const Schedule& schedule,
                                            const std::vector<double>& x) {
  std::vector<double> in = x, out(x.size());
  for (int phase = schedule.period() - 1; phase >= 0; --phase) {
    for (int i = 0; i < schedule.num_peers(); ++i) {
      double sum = schedule.self_weight(i, phase) * in[i];
      for (const Push& push : schedule.out_edges(i, phase)) sum += push.weight * in[push.peer];
      out[i] = sum;
    }
    std::swap(in, out);
  }
  return in;
}

IterativeRate iterative_consensus_rate(const Schedule& schedule) {
  const int n = schedule.num_peers();
  IterativeRate result;
  if (n < 2) return result;
  std::vector<std::vector<double>> basis;
  std::vector<double> alpha, beta;
  std::vector<double> q = start_vector(n);
  const double start_norm = std::sqrt(dot(q, q));
  for (double& v : q) v /= start_norm;
  double ritz = 0.0, checked = -1.0;
  // The complement of consensus has N - 1 dimensions: the space is exhausted by then.
  for (int k = 0; k < n - 1; ++k) {
    basis.push_back(q);
    std::vector<double> w = apply_c(schedule, q);
    alpha.push_back(dot(q, w));
    // Full reorthogonalisation, twice (classical Gram-Schmidt), against every basis vector.
    for (int pass = 0; pass < 2; ++pass) {
      for (const auto& b : basis) {
        const double c = dot(b, w);
        for (int i = 0; i < n; ++i) w[i] -= c * b[i];
      }
    }
    const double norm = std::sqrt(dot(w, w));
    result.iterations = k + 1;
    ritz = largest_eigenvalue(alpha, beta);
    // An invariant subspace: T's eigenvalues are C's there, exactly up to rounding.
    if (norm <= 1e-13 * std::max(ritz, 1e-300) || norm < 1e-300) break;
    if ((k + 1) % 10 == 0) {
      if (std::abs(ritz - checked) <= 1e-15 * ritz) break;
      checked = ritz;
    }
    beta.push_back(norm);
    for (int i = 0; i < n; ++i) q[i] = w[i] / norm;
  }
  result.sigma = std::sqrt(std::max(ritz, 0.0));
  return result;
}

}  // namespace sgp::topology
