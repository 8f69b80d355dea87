#pragma once
// The consensus rate sigma = ||A (I - J)||_2 (analysis.hpp) without forming A: Lanczos on
// C = (I - J) A^T A (I - J), whose largest eigenvalue is sigma^2, applying A and A^T to vectors
// through the schedule's pushes (O(edges) per phase). A period's product costs O(P (N + edges))
// per vector instead of the dense analysis's O(P N^3), so it scales as simulation does: torus-1024
// in well under a second instead of 20+ s.
#include <vector>

#include "sgp/topology/schedule.hpp"

namespace sgp::topology {

// y = A x and y = A^T x for the period's product A = M_{P-1} ... M_0.
std::vector<double> apply_period(const Schedule& schedule, const std::vector<double>& x);
std::vector<double> apply_period_transposed(const Schedule& schedule, const std::vector<double>& x);

struct IterativeRate {
  double sigma = 0.0;
  int iterations = 0;  // Lanczos steps taken
};

// sigma by Lanczos with full reorthogonalisation from a fixed (seeded) start, until the largest
// Ritz value moves by less than 1e-15 relative over 10 steps or the Krylov space is exhausted
// (then it is exact up to rounding).
IterativeRate iterative_consensus_rate(const Schedule& schedule);

}  // namespace sgp::topology
