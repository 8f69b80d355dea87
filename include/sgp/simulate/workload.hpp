#pragma once
// What the simulated peers compute between gossip rounds.
//   consensus: no computation; peer i starts from gossip::consensus_initial_vector (the vectors
//     `sgp consensus` uses: integers whose mean m is known exactly).
//   quadratic: decentralized SGD on least squares with a diagonal design per peer,
//       f_i(theta) = h_i / 2 * || theta - (a + b_i v) ||^2,  f = mean_i f_i,
//     h_i in [0.5, 2] (curvature) and b_i in [-1, 1] (how far peer i's own optimum lies from the
//     others') seeded per peer, a and v seeded D-vectors: every peer's shard wants another
//     optimum (heterogeneity `spread` scales b_i). The optimum of f is known exactly:
//       theta* = a + (sum_i h_i b_i / sum_i h_i) v,   f(theta) - f* = hbar / 2 ||theta - theta*||^2
//     (hbar = mean_i h_i; the sums and means over the live peers when some have failed). A
//     stochastic gradient adds uniform noise of standard deviation `noise` per coordinate, seeded
//     per (peer, round). Every x starts at zero.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace sgp::simulate {

enum class Workload { consensus, quadratic };

class QuadraticProblem {
 public:
  QuadraticProblem(std::uint64_t seed, int peers, std::size_t dim, double spread);

  // f = the mean of the live peers' f_i from now on (after failures or joins): its optimum and
  // mean curvature are recomputed over them.
  void set_live(const std::vector<bool>& live);
  const std::vector<double>& optimum() const { return optimum_; }
  double mean_curvature() const { return mean_h_; }
  // Peer i's own f_i: its curvature h_i and the k-th coordinate of its optimum a + b_i v.
  double curvature(int rank) const { return h_[static_cast<std::size_t>(rank)]; }
  double own_optimum(int rank, std::size_t k) const {
    return a_[k] + b_[static_cast<std::size_t>(rank)] * v_[k];
  }
  // f(theta) - f* for theta = the given vector.
  double gap(const double* theta) const;
  // g = grad f_i(z) + noise, written over z (z: the peer's de-biased parameters, dim values).
  template <typename T>
  void gradient(int rank, std::int64_t round, double noise, T* z) const;

 private:
  std::uint64_t seed_;
  std::size_t dim_;
  std::vector<double> h_;
  std::vector<double> b_;
  std::vector<double> a_;
  std::vector<double> v_;
  std::vector<double> optimum_;
  double mean_h_ = 0.0;
};

}  // namespace sgp::simulate
