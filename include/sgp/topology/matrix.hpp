#pragma once
// A small dense square matrix of doubles (row-major) for the spectral analysis of topologies:
// N is the number of peers, so plain O(N^3) algorithms are fine.
#include <vector>

namespace sgp::topology {

class Matrix {
 public:
  explicit Matrix(int n = 0) : n_(n), a_(static_cast<std::size_t>(n) * n, 0.0) {}
  static Matrix identity(int n);

  int size() const { return n_; }
  double& operator()(int row, int col) { return a_[static_cast<std::size_t>(row) * n_ + col]; }
  double operator()(int row, int col) const { return a_[static_cast<std::size_t>(row) * n_ + col]; }

  friend Matrix operator*(const Matrix& a, const Matrix& b);
  friend Matrix operator-(const Matrix& a, const Matrix& b);
  friend bool operator==(const Matrix&, const Matrix&) = default;

  double frobenius_norm() const;
  double max_abs() const;
  // All singular values, descending (one-sided Jacobi / Hestenes: rotate pairs of columns until
  // all are orthogonal; the singular values are then the column norms).
  std::vector<double> singular_values() const;
  // The spectral radius, by Gelfand's formula rho = lim ||B^t||^(1/t) with t = 2^squarings,
  // renormalizing after each squaring (no overflow or underflow); 0 for a nilpotent matrix.
  double spectral_radius(int squarings = 40) const;

 private:
  int n_;
  std::vector<double> a_;
};

}  // namespace sgp::topology
