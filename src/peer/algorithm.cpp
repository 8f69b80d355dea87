#include "sgp/peer/algorithm.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "sgp/error.hpp"

namespace sgp::peer {

Algorithm parse_algorithm(const std::string& text) {
  if (text == "sgp") return Algorithm::sgp;
  if (text == "osgp") return Algorithm::osgp;
  if (text == "local") return Algorithm::local;
  if (text == "dpsgd") return Algorithm::dpsgd;
  if (text == "exact") return Algorithm::exact;
  throw InputError(fmt::format(
      "--algo: '{}' is not an algorithm (expected sgp, osgp, local, dpsgd or exact)", text));
}

std::string_view algorithm_name(Algorithm algo) {
  switch (algo) {
    case Algorithm::sgp:
      return "sgp";
    case Algorithm::osgp:
      return "osgp";
    case Algorithm::local:
      return "local";
    case Algorithm::dpsgd:
      return "dpsgd";
    case Algorithm::exact:
      return "exact";
  }
  return "?";
}

bool communicates(Algorithm algo) { return algo != Algorithm::local; }

gossip::Mode gossip_mode(Algorithm algo) {
  return algo == Algorithm::osgp ? gossip::Mode::overlap : gossip::Mode::sync;
}

namespace {

// Metropolis-Hastings weights p_ij = 1 / (1 + max(d_i, d_j)) on each phase's undirected graph:
// symmetric and doubly stochastic, so push-sum weights stay exactly 1.
topology::Schedule metropolis(const topology::Schedule& s, const std::string& source) {
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

}  // namespace

topology::Schedule mixing_schedule(Algorithm algo, const topology::Schedule& s,
                                   std::optional<double> self_weight, const std::string& source) {
  switch (algo) {
    case Algorithm::sgp:
    case Algorithm::osgp:
    case Algorithm::local:
      return self_weight ? s.with_self_weight(*self_weight) : s;
    case Algorithm::dpsgd:
      return metropolis(s, source);
    case Algorithm::exact: {
      for (int p = 0; p < s.period(); ++p)
        for (int i = 0; i < s.num_peers(); ++i)
          if (static_cast<int>(s.out_edges(i, p).size()) != s.num_peers() - 1) {
            throw InputError(fmt::format(
                "{}: --algo exact needs a complete topology (every peer pushes to every other), "
                "but peer {} has {} out-edges in phase {}",
                source, i, s.out_edges(i, p).size(), p));
          }
      return s.with_self_weight(1.0 / s.num_peers());
    }
  }
  return s;
}

}  // namespace sgp::peer
