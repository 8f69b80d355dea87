#include "sgp/topology/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "sgp/error.hpp"

namespace sgp::topology {

namespace {
constexpr double kColumnTolerance = 1e-9;
}

Schedule::Schedule(int num_peers, std::vector<std::vector<std::vector<Push>>> out_edges,
                   std::vector<std::vector<double>> self_weights,
                   std::vector<std::string> endpoints)
    : num_peers_(num_peers),
      out_edges_(std::move(out_edges)),
      self_weights_(std::move(self_weights)) {
  SGP_ENFORCE(num_peers >= 1, "a topology needs at least one peer, got {}", num_peers);
  SGP_ENFORCE(!out_edges_.empty(), "a topology needs at least one phase");
  SGP_ENFORCE(self_weights_.size() == out_edges_.size(), "{} phases of edges but {} of weights",
              out_edges_.size(), self_weights_.size());
  in_neighbors_.assign(out_edges_.size(), std::vector<std::vector<int>>(num_peers));
  for (std::size_t p = 0; p < out_edges_.size(); ++p) {
    SGP_ENFORCE(out_edges_[p].size() == static_cast<std::size_t>(num_peers) &&
                    self_weights_[p].size() == static_cast<std::size_t>(num_peers),
                "phase {} must list all {} peers", p, num_peers);
    for (int i = 0; i < num_peers; ++i) {
      double column = self_weights_[p][i];
      SGP_ENFORCE(column >= 0.0 && std::isfinite(column), "phase {}: self weight of {} is {}", p, i,
                  column);
      std::set<int> seen;
      for (const Push& push : out_edges_[p][i]) {
        SGP_ENFORCE(push.peer >= 0 && push.peer < num_peers && push.peer != i,
                    "phase {}: edge {} -> {} is not between two distinct peers", p, i, push.peer);
        SGP_ENFORCE(seen.insert(push.peer).second, "phase {}: edge {} -> {} repeats", p, i,
                    push.peer);
        SGP_ENFORCE(push.weight >= 0.0 && std::isfinite(push.weight),
                    "phase {}: edge {} -> {} has weight {}", p, i, push.peer, push.weight);
        column += push.weight;
        in_neighbors_[p][push.peer].push_back(i);
      }
      SGP_ENFORCE(std::abs(column - 1.0) <= kColumnTolerance,
                  "phase {}: the weights of peer {} sum to {}, not 1", p, i, column);
    }
  }
  for (auto& phase : in_neighbors_)
    for (auto& senders : phase) std::sort(senders.begin(), senders.end());
  set_endpoints(std::move(endpoints));
}

const std::vector<Push>& Schedule::out_edges(int rank, std::int64_t iteration) const {
  SGP_ENFORCE(rank >= 0 && rank < num_peers_, "rank {} outside 0..{}", rank, num_peers_ - 1);
  return out_edges_[phase_of(iteration)][rank];
}

double Schedule::self_weight(int rank, std::int64_t iteration) const {
  SGP_ENFORCE(rank >= 0 && rank < num_peers_, "rank {} outside 0..{}", rank, num_peers_ - 1);
  return self_weights_[phase_of(iteration)][rank];
}

const std::vector<int>& Schedule::in_neighbors(int rank, std::int64_t iteration) const {
  SGP_ENFORCE(rank >= 0 && rank < num_peers_, "rank {} outside 0..{}", rank, num_peers_ - 1);
  return in_neighbors_[phase_of(iteration)][rank];
}

double Schedule::push_weight(int sender, int rank, std::int64_t iteration) const {
  for (const Push& push : out_edges(sender, iteration))
    if (push.peer == rank) return push.weight;
  return -1.0;
}

std::vector<int> Schedule::all_out_neighbors(int rank) const {
  std::set<int> peers;
  for (int p = 0; p < period(); ++p)
    for (const Push& push : out_edges(rank, p)) peers.insert(push.peer);
  return {peers.begin(), peers.end()};
}

std::vector<int> Schedule::all_in_neighbors(int rank) const {
  std::set<int> peers;
  for (int p = 0; p < period(); ++p)
    for (int sender : in_neighbors(rank, p)) peers.insert(sender);
  return {peers.begin(), peers.end()};
}

const std::string& Schedule::endpoint(int rank) const {
  SGP_ENFORCE(has_endpoints(), "this topology has no endpoints");
  SGP_ENFORCE(rank >= 0 && rank < num_peers_, "rank {} outside 0..{}", rank, num_peers_ - 1);
  return endpoints_[rank];
}

void Schedule::set_endpoints(std::vector<std::string> endpoints) {
  SGP_ENFORCE(endpoints.empty() || endpoints.size() == static_cast<std::size_t>(num_peers_),
              "{} endpoints for {} peers", endpoints.size(), num_peers_);
  endpoints_ = std::move(endpoints);
}

const std::string& Schedule::public_key(int rank) const {
  SGP_ENFORCE(has_public_keys(), "this topology has no public keys");
  SGP_ENFORCE(rank >= 0 && rank < num_peers_, "rank {} outside 0..{}", rank, num_peers_ - 1);
  return public_keys_[rank];
}

void Schedule::set_public_keys(std::vector<std::string> keys, std::string monitor_key) {
  SGP_ENFORCE(keys.empty() || keys.size() == static_cast<std::size_t>(num_peers_),
              "{} public keys for {} peers", keys.size(), num_peers_);
  SGP_ENFORCE(monitor_key.empty() || !keys.empty(), "a monitor key without peer keys");
  public_keys_ = std::move(keys);
  monitor_public_key_ = std::move(monitor_key);
}

Schedule Schedule::with_self_weight(double a) const {
  SGP_ENFORCE(a > 0.0 && a <= 1.0, "self weight must be in (0, 1], got {}", a);
  auto edges = out_edges_;
  auto selves = self_weights_;
  for (std::size_t p = 0; p < edges.size(); ++p) {
    for (int i = 0; i < num_peers_; ++i) {
      auto& out = edges[p][i];
      selves[p][i] = out.empty() ? 1.0 : a;
      for (Push& push : out) push.weight = (1.0 - a) / static_cast<double>(out.size());
    }
  }
  Schedule result(num_peers_, std::move(edges), std::move(selves), endpoints_);
  result.set_public_keys(public_keys_, monitor_public_key_);
  return result;
}

}  // namespace sgp::topology
