#pragma once
// Heterogeneous quadratics f_i(z) = a_i / 2 |z - b_i|^2 in 3 dimensions, one per rank:
// curvatures and centres far apart, so that plain push-sum SGD with a constant step stalls at a
// floor while gradient tracking reaches the minimiser of the sum, sum a_i b_i / sum a_i (exact
// in float for 4 peers: (4.5, -0.5, -2)). Used by the update rules' tests.
#include <vector>

namespace sgp::testing {

struct Quadratic {
  double a;
  std::vector<double> b;
};

inline Quadratic quadratic(int rank) {
  const double a[] = {1.0, 2.0, 0.5, 1.5};
  return {a[rank % 4], {3.0 * rank, -2.0 + rank, rank % 2 == 0 ? 5.0 : -5.0}};
}

// The minimiser of the sum of the first n ranks' quadratics.
inline std::vector<double> quadratic_optimum(int n) {
  std::vector<double> num(quadratic(0).b.size(), 0.0);
  double den = 0.0;
  for (int i = 0; i < n; ++i) {
    const auto q = quadratic(i);
    for (std::size_t j = 0; j < num.size(); ++j) num[j] += q.a * q.b[j];
    den += q.a;
  }
  for (auto& v : num) v /= den;
  return num;
}

}  // namespace sgp::testing
