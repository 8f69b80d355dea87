#include "sgp/config/algorithm.hpp"

#include <algorithm>
#include <array>
#include <vector>

#include <fmt/format.h>

#include "sgp/error.hpp"

namespace sgp::config {

namespace {

using gossip::Mode;

constexpr std::array<AlgorithmInfo, 10> kAlgorithms = {{
    {Algorithm::sgp, "sgp", "Stochastic Gradient Push: synchronous push-sum every H iterations",
     true, Mode::sync, true, MixingRule::as_given, true, true, false, false},
    {Algorithm::osgp, "osgp",
     "overlap SGP: push-sum on a communication thread, in-neighbours at most --tau rounds behind",
     true, Mode::overlap, true, MixingRule::as_given, true, true, false, false},
    {Algorithm::asgp, "asgp",
     "asynchronous SGP: nobody waits for a neighbour; acknowledged pushes make lost messages "
     "cost nothing; failed peers are excluded, peers may join (--join) and leave",
     true, Mode::async, true, MixingRule::as_given, false, false, true, true},
    {Algorithm::local, "local", "no communication: each peer trains its shard alone (a baseline)",
     false, Mode::sync, false, MixingRule::as_given, false, true, false, false},
    {Algorithm::dpsgd, "dpsgd",
     "D-PSGD (Lian et al. 2017): symmetric gossip with Metropolis-Hastings weights (or the "
     "topology's own when they are symmetric, as base's); needs an undirected topology",
     true, Mode::sync, false, MixingRule::metropolis, true, true, false, false},
    {Algorithm::exact, "exact",
     "exact averaging every round on a complete topology (AllReduce by gossip, for comparison)",
     true, Mode::sync, false, MixingRule::uniform_1_over_n, true, true, false, false},
    {Algorithm::allreduce, "allreduce",
     "ring AllReduce (reduce-scatter then all-gather, chunked and pipelined) over ranks "
     "0..N-1 in order: every peer has the exact average every round; uses only the topology "
     "file's endpoints",
     true, Mode::allreduce, false, MixingRule::ring, false, true, false, false},
    {Algorithm::gt, "gt",
     "gradient tracking over synchronous push-sum (Push-DIGing / ADD-OPT): each peer mixes its "
     "tracker y of the average gradient with x in one message and steps along y; no "
     "heterogeneity floor with a constant step",
     true, Mode::sync, true, MixingRule::as_given, true, true, false, false, true},
    {Algorithm::ogt, "ogt",
     "gradient tracking over overlap SGP (osgp's engine): [x; y] in one message, in-neighbours "
     "at most --tau rounds behind; the mass in flight keeps the trackers' sum",
     true, Mode::overlap, true, MixingRule::as_given, false, true, false, false, true},
    // A peer that leaves or fails takes its tracker mass with it: the survivors' trackers would
    // no longer sum to their gradients (a bias that never decays), so no joins and fail-stop.
    {Algorithm::agt, "agt",
     "gradient tracking over asynchronous push-sum (asgp's engine): [x; y] in one message, "
     "carried by acknowledged pushes, so lost, duplicated or reordered messages cost nothing; "
     "fail-stop, no joins",
     true, Mode::async, true, MixingRule::as_given, false, false, false, false, true},
}};

// Whether every phase's weights are symmetric already (p_ij == p_ji on every edge, so doubly
// stochastic), as base and hyper-hypercube are: their weights make them exact, so dpsgd keeps
// them.
bool symmetric_weights(const topology::Schedule& s) {
  for (int p = 0; p < s.period(); ++p)
    for (int i = 0; i < s.num_peers(); ++i)
      for (const auto& push : s.out_edges(i, p))
        if (s.push_weight(push.peer, i, p) != push.weight) return false;
  return true;
}

// p_ij = 1 / (1 + max(d_i, d_j)) on each phase's undirected graph: symmetric and doubly
// stochastic, so push-sum weights stay exactly 1. Weights that are symmetric already are kept.
topology::Schedule metropolis(const topology::Schedule& s, const std::string& source) {
  if (symmetric_weights(s)) return s;
  const int n = s.num_peers();
  std::vector<std::vector<std::vector<topology::Push>>> edges(s.period());
  std::vector<std::vector<double>> selves(s.period(), std::vector<double>(n));
  for (int p = 0; p < s.period(); ++p) {
    edges[p].resize(n);
    for (int i = 0; i < n; ++i) {
      const auto degree_i = s.out_edges(i, p).size();
      double kept = 1.0;
      for (const auto& push : s.out_edges(i, p)) {
        if (s.push_weight(push.peer, i, p) < 0.0) {
          throw InputError(fmt::format(
              "{}: --algo dpsgd needs an undirected topology, but edge {} -> {} (phase {}) has "
              "no edge {} -> {}",
              source, i, push.peer, p, push.peer, i));
        }
        const auto degree_j = s.out_edges(push.peer, p).size();
        const double weight = 1.0 / (1.0 + static_cast<double>(std::max(degree_i, degree_j)));
        edges[p][i].push_back({push.peer, weight});
        kept -= weight;
      }
      selves[p][i] = kept;
    }
  }
  topology::Schedule result(n, std::move(edges), std::move(selves), s.endpoints());
  result.set_public_keys(s.public_keys(), s.monitor_public_key());  // CURVE keys stay with ranks
  return result;
}

topology::Schedule uniform_complete(const topology::Schedule& s, std::string_view algo,
                                    const std::string& source) {
  for (int p = 0; p < s.period(); ++p)
    for (int i = 0; i < s.num_peers(); ++i)
      if (static_cast<int>(s.out_edges(i, p).size()) != s.num_peers() - 1) {
        throw InputError(fmt::format(
            "{}: --algo {} needs a complete topology (every peer pushes to every other), but "
            "peer {} has {} out-edges in phase {}",
            source, algo, i, s.out_edges(i, p).size(), p));
      }
  return s.with_self_weight(1.0 / s.num_peers());
}

// The ring allreduce's links: rank i pushes to i + 1 only (the weights, 1/2, are never used to
// mix; they make the schedule valid and give resumes their digest).
topology::Schedule ring(const topology::Schedule& s) {
  const int n = s.num_peers();
  std::vector<std::vector<std::vector<topology::Push>>> edges(
      1, std::vector<std::vector<topology::Push>>(n));
  std::vector<std::vector<double>> selves(1, std::vector<double>(n, 1.0));
  if (n > 1) {
    for (int i = 0; i < n; ++i) {
      edges[0][i].push_back({(i + 1) % n, 0.5});
      selves[0][i] = 0.5;
    }
  }
  topology::Schedule result(n, std::move(edges), std::move(selves), s.endpoints());
  result.set_public_keys(s.public_keys(), s.monitor_public_key());
  return result;
}

}  // namespace

std::span<const AlgorithmInfo> algorithms() { return kAlgorithms; }

const AlgorithmInfo& info(Algorithm algo) {
  for (const auto& row : kAlgorithms)
    if (row.algo == algo) return row;
  SGP_ENFORCE(false, "algorithm {} has no row", static_cast<int>(algo));
}

std::span<const NamedValue<Algorithm>> names(Algorithm) {
  static const auto table = [] {
    std::array<NamedValue<Algorithm>, kAlgorithms.size()> t{};
    for (std::size_t i = 0; i < kAlgorithms.size(); ++i) {
      t[i] = {kAlgorithms[i].algo, kAlgorithms[i].name, kAlgorithms[i].help};
    }
    return t;
  }();
  return table;
}

topology::Schedule mixing_schedule(Algorithm algo, const topology::Schedule& s,
                                   std::optional<double> self_weight, const std::string& source) {
  const AlgorithmInfo& row = info(algo);
  switch (row.mixing) {
    case MixingRule::as_given:
      return self_weight && row.uses_self_weight ? s.with_self_weight(*self_weight) : s;
    case MixingRule::metropolis:
      return metropolis(s, source);
    case MixingRule::uniform_1_over_n:
      return uniform_complete(s, row.name, source);
    case MixingRule::ring:
      return ring(s);
  }
  return s;
}

}  // namespace sgp::config
