#pragma once
// Small independent helpers for the topology tests: they recompute from the Schedule's plain
// queries what the library computes with Boost.Graph and its own linear algebra.
#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <vector>

#include "sgp/topology/schedule.hpp"

namespace sgp::testing {

using Dense = std::vector<std::vector<double>>;

// The period's mixing product A = M_{P-1} ... M_0 with M_p[j][i] = weight i pushes to j.
inline Dense naive_period_product(const topology::Schedule& s) {
  const int n = s.num_peers();
  Dense a(n, std::vector<double>(n, 0.0));
  for (int i = 0; i < n; ++i) a[i][i] = 1.0;
  for (int p = 0; p < s.period(); ++p) {
    Dense next(n, std::vector<double>(n, 0.0));
    // next = M_p a: column c of a is the state after pushing unit mass from c.
    for (int c = 0; c < n; ++c)
      for (int i = 0; i < n; ++i) {
        next[i][c] += s.self_weight(i, p) * a[i][c];
        for (const auto& push : s.out_edges(i, p)) next[push.peer][c] += push.weight * a[i][c];
      }
    a = next;
  }
  return a;
}

// sigma = ||A (I - 11^T/N)||_2 by power iteration on B^T B (B = A with each row's mean removed).
inline double power_iteration_rate(const topology::Schedule& s, int iterations = 20000) {
  Dense b = naive_period_product(s);
  const int n = static_cast<int>(b.size());
  for (auto& row : b) {
    double mean = 0.0;
    for (double v : row) mean += v / n;
    for (double& v : row) v -= mean;
  }
  std::vector<double> x(n);
  for (int i = 0; i < n; ++i) x[i] = 1.0 + 0.37 * i + 0.11 * i * i;  // not along any symmetry
  double rayleigh = 0.0;
  for (int it = 0; it < iterations; ++it) {
    double norm = 0.0;
    for (double v : x) norm += v * v;
    norm = std::sqrt(norm);
    if (norm == 0.0) return 0.0;
    for (double& v : x) v /= norm;
    std::vector<double> bx(n, 0.0), btbx(n, 0.0);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) bx[i] += b[i][j] * x[j];
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) btbx[j] += b[i][j] * bx[i];
    rayleigh = 0.0;
    for (int i = 0; i < n; ++i) rayleigh += x[i] * btbx[i];
    x = btbx;
  }
  return std::sqrt(std::max(0.0, rayleigh));
}

// Longest shortest path of the union graph by plain BFS; nullopt when some pair is unreachable.
inline std::optional<int> naive_diameter(const topology::Schedule& s) {
  const int n = s.num_peers();
  int diameter = 0;
  for (int src = 0; src < n; ++src) {
    std::vector<int> dist(n, -1);
    std::vector<int> queue = {src};
    dist[src] = 0;
    for (std::size_t head = 0; head < queue.size(); ++head)
      for (int w : s.all_out_neighbors(queue[head]))
        if (dist[w] < 0) {
          dist[w] = dist[queue[head]] + 1;
          queue.push_back(w);
        }
    for (int d : dist) {
      if (d < 0) return std::nullopt;
      diameter = std::max(diameter, d);
    }
  }
  return diameter;
}

// The out-neighbours of `rank` in `phase` as a set.
inline std::set<int> out_set(const topology::Schedule& s, int rank, int phase) {
  std::set<int> peers;
  for (const auto& push : s.out_edges(rank, phase)) peers.insert(push.peer);
  return peers;
}

}  // namespace sgp::testing
