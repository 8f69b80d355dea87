#pragma once
// The training algorithms one code path runs (`--algo`), one row each in algorithms(): what the
// peer does with the topology is read from the row, never from a switch on the name.
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "sgp/gossip/push_sum_config.hpp"
#include "sgp/named_values.hpp"
#include "sgp/topology/schedule.hpp"

namespace sgp::config {

enum class Algorithm { sgp, osgp, asgp, local, dpsgd, exact, allreduce, gt, ogt, agt };

// How an algorithm derives the weights it mixes with from the topology file's schedule.
enum class MixingRule {
  as_given,    // the file's weights (or --self-weight's)
  metropolis,  // Metropolis-Hastings weights on an undirected graph (doubly stochastic); weights
               // that are symmetric already are kept
  uniform_1_over_n,  // a complete graph with every weight 1/N: exact averaging every round
  ring,              // the directed ring 0 -> 1 -> ... -> N-1 -> 0 of the file's ranks and
                     // endpoints, whatever its edges (the links ring allreduce uses)
};

struct AlgorithmInfo {
  Algorithm algo;
  std::string_view name;
  std::string_view help;
  bool communicates;      // false: the peer trains alone (no transport, no engine)
  gossip::Mode mode;      // how the push-sum engine mixes
  bool uses_self_weight;  // --self-weight changes its weights (sweeps vary it only then)
  MixingRule mixing;
  // What the algorithm can do, for the checks and defaults that depend on it:
  bool compressible;        // --compress (fp16, bf16) applies: push-sum rounds of float32 x
  bool checkpoints;         // --checkpoint-every and --resume apply (peers at one iteration)
  bool joins;               // peers may join a run in progress (sgp peer --join) and leave it
  bool tolerates_failures;  // a failed peer is excluded and the others go on
                            // (--on-peer-failure auto: go-on)
  // Gradient tracking: the engine mixes [x; y], y the tracker of the average gradient, and the
  // step follows y (sgp/optim/update_rule.hpp).
  bool tracks_gradient = false;
};

// One row per algorithm, in the order help and sweeps list them.
std::span<const AlgorithmInfo> algorithms();
const AlgorithmInfo& info(Algorithm algo);
std::span<const NamedValue<Algorithm>> names(Algorithm);

// The schedule `algo` mixes with, derived from the topology file's. `self_weight` (the
// --self-weight mixing rate) overrides the file's weights where the row says so. Throws
// InputError naming `source` when the topology does not fit: metropolis needs every edge in both
// directions in each phase; uniform_1_over_n needs a complete graph.
topology::Schedule mixing_schedule(Algorithm algo, const topology::Schedule& file_schedule,
                                   std::optional<double> self_weight, const std::string& source);

}  // namespace sgp::config
