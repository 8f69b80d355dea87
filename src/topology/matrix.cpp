#include "sgp/topology/matrix.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

#include "sgp/error.hpp"

namespace sgp::topology {

Matrix Matrix::identity(int n) {
  Matrix m(n);
  for (int i = 0; i < n; ++i) m(i, i) = 1.0;
  return m;
}

Matrix operator*(const Matrix& a, const Matrix& b) {
  SGP_ENFORCE(a.n_ == b.n_, "multiplying a {0}x{0} by a {1}x{1} matrix", a.n_, b.n_);
  const int n = a.n_;
  Matrix c(n);
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < n; ++k) {
      const double aik = a(i, k);
      if (aik == 0.0) continue;
      for (int j = 0; j < n; ++j) c(i, j) += aik * b(k, j);
    }
  return c;
}

Matrix operator-(const Matrix& a, const Matrix& b) {
  SGP_ENFORCE(a.n_ == b.n_, "subtracting a {1}x{1} from a {0}x{0} matrix", a.n_, b.n_);
  Matrix c = a;
  for (std::size_t i = 0; i < c.a_.size(); ++i) c.a_[i] -= b.a_[i];
  return c;
}

double Matrix::frobenius_norm() const {
  double sum = 0.0;
  for (double v : a_) sum += v * v;
  return std::sqrt(sum);
}

double Matrix::max_abs() const {
  double m = 0.0;
  for (double v : a_) m = std::max(m, std::abs(v));
  return m;
}

std::vector<double> Matrix::singular_values() const {
  // Work on the columns of a copy: u[col][row]. Each sweep rotates every pair (p, q) so that
  // columns p and q become orthogonal; stop when all pairs are orthogonal to machine precision.
  const int n = n_;
  std::vector<std::vector<double>> u(n, std::vector<double>(n));
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < n; ++c) u[c][r] = (*this)(r, c);
  constexpr double kEps = 1e-15;
  for (int sweep = 0; sweep < 100; ++sweep) {
    bool rotated = false;
    for (int p = 0; p < n; ++p) {
      for (int q = p + 1; q < n; ++q) {
        double alpha = 0.0, beta = 0.0, gamma = 0.0;
        for (int r = 0; r < n; ++r) {
          alpha += u[p][r] * u[p][r];
          beta += u[q][r] * u[q][r];
          gamma += u[p][r] * u[q][r];
        }
        if (gamma == 0.0 || std::abs(gamma) <= kEps * std::sqrt(alpha * beta)) continue;
        rotated = true;
        const double zeta = (beta - alpha) / (2.0 * gamma);
        const double t = std::copysign(1.0, zeta) / (std::abs(zeta) + std::hypot(1.0, zeta));
        const double c = 1.0 / std::hypot(1.0, t);
        const double s = c * t;
        for (int r = 0; r < n; ++r) {
          const double up = u[p][r], uq = u[q][r];
          u[p][r] = c * up - s * uq;
          u[q][r] = s * up + c * uq;
        }
      }
    }
    if (!rotated) break;
  }
  std::vector<double> sigma(n);
  for (int c = 0; c < n; ++c) {
    double sum = 0.0;
    for (double v : u[c]) sum += v * v;
    sigma[c] = std::sqrt(sum);
  }
  std::sort(sigma.begin(), sigma.end(), std::greater<>());
  return sigma;
}

double Matrix::spectral_radius(int squarings) const {
  // log ||B^(2^k)||_F = log_norm; c = B^(2^k) / ||B^(2^k)||_F.
  const double first = frobenius_norm();
  if (first == 0.0) return 0.0;
  Matrix c = *this;
  for (double& v : c.a_) v /= first;
  double log_norm = std::log(first);
  double estimate = first;
  for (int k = 1; k <= squarings; ++k) {
    c = c * c;
    const double norm = c.frobenius_norm();
    if (norm == 0.0) return 0.0;  // nilpotent (to working precision)
    for (double& v : c.a_) v /= norm;
    log_norm = 2.0 * log_norm + std::log(norm);
    estimate = std::exp(std::ldexp(log_norm, -k));
  }
  return estimate;
}

}  // namespace sgp::topology
