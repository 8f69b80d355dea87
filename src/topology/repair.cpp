#include "sgp/topology/repair.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sgp/error.hpp"
#include "sgp/topology/analysis.hpp"

namespace sgp::topology {

namespace {

// The live ranks reached from gone rank `j` along phase-`phase` edges, passing only gone ranks.
std::vector<int> live_successors(const Schedule& s, const std::vector<bool>& live, int j,
                                 int phase) {
  std::vector<int> found, stack = {j};
  std::vector<bool> seen(s.num_peers(), false);
  seen[j] = true;
  while (!stack.empty()) {
    const int at = stack.back();
    stack.pop_back();
    for (const Push& push : s.out_edges(at, phase)) {
      if (seen[push.peer]) continue;
      seen[push.peer] = true;
      (live[push.peer] ? found : stack).push_back(push.peer);
    }
  }
  if (found.empty()) {  // j pushed nowhere live: the next live rank after it
    for (int k = 1; k < s.num_peers(); ++k) {
      const int r = (j + k) % s.num_peers();
      if (live[r]) return {r};
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

// Rank i's pushes in one phase over the live ranks, and what it keeps.
void repair_column(const Schedule& s, const std::vector<bool>& live, int i, int phase,
                   std::vector<Push>& edges, double& self) {
  std::map<int, double> weights;  // ordered: edges come out in rank order
  self = s.self_weight(i, phase);
  for (const Push& push : s.out_edges(i, phase)) {
    if (live[push.peer]) {
      weights[push.peer] += push.weight;
      continue;
    }
    const auto targets = live_successors(s, live, push.peer, phase);
    for (int t : targets) {
      const double share = push.weight / static_cast<double>(targets.size());
      if (t == i) {
        self += share;
      } else {
        weights[t] += share;
      }
    }
  }
  for (const auto& [peer, weight] : weights) edges.push_back({peer, weight});
}

void check_connected(const Schedule& repaired, const std::vector<bool>& live) {
  std::vector<std::vector<int>> live_groups;
  for (const auto& group : union_components(repaired)) {
    if (live[group.front()]) live_groups.push_back(group);  // a gone rank is alone in its group
  }
  if (live_groups.size() > 1) {
    std::vector<std::string> parts;
    for (const auto& g : live_groups) parts.push_back(fmt::format("{{{}}}", fmt::join(g, ", ")));
    throw InputError(fmt::format(
        "the surviving peers are no longer strongly connected: components {} (mixing cannot "
        "reach consensus; restart the missing peers with --join, or use a better connected "
        "topology)",
        fmt::join(parts, ", ")));
  }
}

}  // namespace

Schedule repair_schedule(const Schedule& s, const std::vector<bool>& live) {
  const int n = s.num_peers();
  SGP_ENFORCE(static_cast<int>(live.size()) == n, "{} liveness flags for {} peers", live.size(), n);
  if (std::none_of(live.begin(), live.end(), [](bool b) { return b; })) {
    throw InputError("no peer is left alive");
  }
  std::vector<std::vector<std::vector<Push>>> edges(s.period(), std::vector<std::vector<Push>>(n));
  std::vector<std::vector<double>> selves(s.period(), std::vector<double>(n, 1.0));
  for (int p = 0; p < s.period(); ++p)
    for (int i = 0; i < n; ++i)
      if (live[i]) repair_column(s, live, i, p, edges[p][i], selves[p][i]);
  Schedule repaired(n, std::move(edges), std::move(selves), s.endpoints());
  check_connected(repaired, live);
  return repaired;
}

}  // namespace sgp::topology
