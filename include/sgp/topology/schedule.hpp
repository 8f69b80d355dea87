#pragma once
// A time-varying directed topology as the gossip engine sees it: `period` phases, phase
// k % period active at iteration k. Plain data: Boost.Graph stays inside the topology module's
// .cpp files (generators, DOT files, analysis); this header is all other modules need.
//
// Mixing weights are column-stochastic: for every phase and rank i,
//   self_weight(i) + sum of the weights of i's out-edges == 1.
#include <cstdint>
#include <string>
#include <vector>

namespace sgp::topology {

// An out-edge of rank i: i pushes `weight` (= p_ji) of its (x, w) to `peer` (= j).
struct Push {
  int peer = 0;
  double weight = 0.0;
  friend bool operator==(const Push&, const Push&) = default;
};

class Schedule {
 public:
  // out_edges[phase][rank]: the pushes of `rank` in that phase (no self edge);
  // self_weights[phase][rank]: p_ii; endpoints: one per rank, or empty when none are known.
  // Throws InvariantError if the shapes disagree, a peer index is out of range, an edge repeats
  // or a weight is negative, or a column does not sum to 1 (within 1e-9).
  Schedule(int num_peers, std::vector<std::vector<std::vector<Push>>> out_edges,
           std::vector<std::vector<double>> self_weights, std::vector<std::string> endpoints = {});

  int num_peers() const { return num_peers_; }
  int period() const { return static_cast<int>(out_edges_.size()); }
  int phase_of(std::int64_t iteration) const { return static_cast<int>(iteration % period()); }

  const std::vector<Push>& out_edges(int rank, std::int64_t iteration) const;
  double self_weight(int rank, std::int64_t iteration) const;
  // The ranks that push to `rank` at `iteration` (how many messages it must expect), ascending.
  const std::vector<int>& in_neighbors(int rank, std::int64_t iteration) const;
  // The weight p_{rank, sender} that `sender` uses when pushing to `rank` at `iteration`, or a
  // negative number when `sender` does not push to `rank` then.
  double push_weight(int sender, int rank, std::int64_t iteration) const;

  // Unions over one period, ascending: every rank `rank` may ever push to / receive from.
  std::vector<int> all_out_neighbors(int rank) const;
  std::vector<int> all_in_neighbors(int rank) const;

  bool has_endpoints() const { return !endpoints_.empty(); }
  const std::string& endpoint(int rank) const;
  const std::vector<std::string>& endpoints() const { return endpoints_; }
  void set_endpoints(std::vector<std::string> endpoints);

  // CURVE public keys (Z85, 40 characters, `sgp keygen`): one per rank, or none. The monitor's
  // key may be empty even when the ranks have keys (then no keyed monitor can be used).
  bool has_public_keys() const { return !public_keys_.empty(); }
  const std::string& public_key(int rank) const;
  const std::vector<std::string>& public_keys() const { return public_keys_; }
  const std::string& monitor_public_key() const { return monitor_public_key_; }
  void set_public_keys(std::vector<std::string> keys, std::string monitor_key = {});

  // The same graphs with self weight `a` in every phase and 1 - a spread evenly over each rank's
  // out-edges (the --self-weight mixing rate). a in (0, 1]; a rank with no out-edges keeps 1.
  Schedule with_self_weight(double a) const;

  // Same peers, phases, weights (exactly), edge order, endpoints and keys.
  friend bool operator==(const Schedule&, const Schedule&) = default;

 private:
  int num_peers_;
  std::vector<std::vector<std::vector<Push>>> out_edges_;
  std::vector<std::vector<double>> self_weights_;
  std::vector<std::vector<std::vector<int>>> in_neighbors_;  // [phase][rank]
  std::vector<std::string> endpoints_;
  std::vector<std::string> public_keys_;
  std::string monitor_public_key_;
};

}  // namespace sgp::topology
