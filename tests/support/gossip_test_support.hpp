#pragma once
// Shared by the gossip tests: hand-built schedules (directed ring, one-peer exponential,
// complete), seeded initial vectors with an exactly known mean, and a reference push-sum run in
// double precision that tells how many rounds a topology needs.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "sgp/topology/schedule.hpp"

namespace sgp::testing {

enum class Graph { ring, exponential, complete };

inline std::string graph_name(Graph g) {
  switch (g) {
    case Graph::ring:
      return "ring";
    case Graph::exponential:
      return "exponential";
    case Graph::complete:
      return "complete";
  }
  return "?";
}

// Uniform mixing over out-degree + 1 in every phase.
inline topology::Schedule make_schedule(Graph g, int n) {
  std::vector<std::vector<std::vector<topology::Push>>> out;
  std::vector<std::vector<double>> self;
  auto add_phase = [&](auto targets_of) {
    std::vector<std::vector<topology::Push>> edges(n);
    std::vector<double> a(n, 1.0);
    for (int i = 0; i < n; ++i) {
      std::vector<int> targets = targets_of(i);
      const double p = 1.0 / static_cast<double>(targets.size() + 1);
      for (int j : targets) edges[i].push_back({j, p});
      a[i] = targets.empty() ? 1.0 : p;
    }
    out.push_back(edges);
    self.push_back(a);
  };
  if (n == 1) {
    add_phase([](int) { return std::vector<int>{}; });
  } else if (g == Graph::ring) {
    add_phase([n](int i) { return std::vector<int>{(i + 1) % n}; });
  } else if (g == Graph::complete) {
    add_phase([n](int i) {
      std::vector<int> t;
      for (int j = 0; j < n; ++j)
        if (j != i) t.push_back(j);
      return t;
    });
  } else {
    // One peer per phase: i pushes to i + 2^k, k = 0 .. ceil(log2 n) - 1.
    for (int hop = 1; hop < n; hop *= 2) {
      add_phase([n, hop](int i) { return std::vector<int>{(i + hop) % n}; });
    }
  }
  return topology::Schedule(n, out, self);
}

// Peer i's initial vector: integers around 64 (float32 relative rounding stays far below the
// 1e-6 the tests ask for), the last peer's chosen so that the global mean is an integer vector
// (exact in float32: once reached, mixing it adds no rounding error).
inline std::vector<float> initial_vector(int rank, int num_peers, std::size_t dim) {
  auto target = [](std::size_t d) { return 64.0 + static_cast<int>((d * 5) % 11) - 5; };
  auto deviation = [](int r, std::size_t d) {
    return static_cast<double>(static_cast<int>((r * 37 + d * 11) % 15) - 7);
  };
  std::vector<float> x(dim);
  for (std::size_t d = 0; d < dim; ++d) {
    double value = target(d);
    if (rank < num_peers - 1) {
      value += deviation(rank, d);
    } else {
      for (int r = 0; r < num_peers - 1; ++r) value -= deviation(r, d);
    }
    x[d] = static_cast<float>(value);
  }
  return x;
}

inline std::vector<double> exact_mean(int n, std::size_t dim) {
  std::vector<double> mean(dim, 0.0);
  for (int r = 0; r < n; ++r) {
    auto x = initial_vector(r, n, dim);
    for (std::size_t d = 0; d < dim; ++d) mean[d] += x[d];
  }
  for (auto& m : mean) m /= n;
  return mean;
}

// Rounds after which push-sum in double precision has every peer's de-biased vector within
// `tolerance` (relative, infinity norm) of the mean: the topology's actual consensus rate. With
// delay > 0, every message is applied `delay` rounds late (overlap mode's worst case for
// tau = delay), which mixes more slowly.
inline int reference_rounds(const topology::Schedule& s, std::size_t dim, double tolerance,
                            int delay = 0, int max_rounds = 100000) {
  const int n = s.num_peers();
  std::vector<std::vector<double>> x(n);
  std::vector<double> w(n, 1.0);
  for (int r = 0; r < n; ++r) {
    auto v = initial_vector(r, n, dim);
    x[r].assign(v.begin(), v.end());
  }
  // pending[k % (delay + 1)]: what arrives at the end of round k.
  std::vector<std::vector<std::vector<double>>> px(
      delay + 1, std::vector<std::vector<double>>(n, std::vector<double>(dim, 0.0)));
  std::vector<std::vector<double>> pw(delay + 1, std::vector<double>(n, 0.0));
  const auto mean = exact_mean(n, dim);
  double scale = 0;
  for (double m : mean) scale = std::max(scale, std::abs(m));
  for (int k = 0; k < max_rounds; ++k) {
    double worst = 0;
    for (int i = 0; i < n; ++i) {
      for (std::size_t d = 0; d < dim; ++d) {
        worst = std::max(worst, std::abs(x[i][d] / w[i] - mean[d]));
      }
    }
    if (worst <= tolerance * scale) return k;
    const int slot_out = (k + delay) % (delay + 1);
    for (int i = 0; i < n; ++i) {
      for (const auto& e : s.out_edges(i, k)) {
        for (std::size_t d = 0; d < dim; ++d) px[slot_out][e.peer][d] += e.weight * x[i][d];
        pw[slot_out][e.peer] += e.weight * w[i];
      }
    }
    const int slot_in = k % (delay + 1);
    for (int i = 0; i < n; ++i) {
      const double a = s.self_weight(i, k);
      for (std::size_t d = 0; d < dim; ++d) {
        x[i][d] = a * x[i][d] + px[slot_in][i][d];
        px[slot_in][i][d] = 0;
      }
      w[i] = a * w[i] + pw[slot_in][i];
      pw[slot_in][i] = 0;
    }
  }
  return max_rounds;
}

// The relative error (infinity norm, against the exact mean) that synchronous push-sum reaches
// after `rounds` when x is float32, computed sequentially in the engine's order of operations
// (x *= p_ii, then x += p_ij * x_j for each in-neighbour j). Slow graphs stall above 1e-6 here:
// e.g. the 16-peer directed ring stops at 2.65e-6, a fixed point of float32 rounding, not of
// push-sum. Tests allow max(1e-6, 2 x this floor).
inline double float32_floor(const topology::Schedule& s, std::size_t dim, int rounds) {
  const int n = s.num_peers();
  std::vector<std::vector<float>> x(n);
  std::vector<double> w(n, 1.0);
  for (int r = 0; r < n; ++r) x[r] = initial_vector(r, n, dim);
  for (int k = 0; k < rounds; ++k) {
    auto sent = x;
    auto sent_w = w;
    for (int i = 0; i < n; ++i) {
      const auto a = static_cast<float>(s.self_weight(i, k));
      for (auto& v : x[i]) v *= a;
      w[i] *= s.self_weight(i, k);
      for (int j : s.in_neighbors(i, k)) {
        const double p = s.push_weight(j, i, k);
        for (std::size_t d = 0; d < dim; ++d) x[i][d] += static_cast<float>(p) * sent[j][d];
        w[i] += p * sent_w[j];
      }
    }
  }
  const auto mean = exact_mean(n, dim);
  double worst = 0, scale = 0;
  for (int i = 0; i < n; ++i) {
    for (std::size_t d = 0; d < dim; ++d) {
      worst = std::max(worst, std::abs(static_cast<float>(x[i][d] / w[i]) - mean[d]));
      scale = std::max(scale, std::abs(mean[d]));
    }
  }
  return worst / scale;
}

}  // namespace sgp::testing
