#pragma once
// The training algorithms one code path runs (`--algo`):
//   sgp    Stochastic Gradient Push, synchronous push-sum every H iterations (Assran et al.)
//   osgp   overlap SGP: push-sum on a communication thread, in-neighbours at most tau behind
//   local  no communication at all (each peer trains its shard alone; a baseline)
//   dpsgd  D-PSGD (Lian et al. 2017): symmetric gossip with doubly-stochastic Metropolis-Hastings
//          weights on an undirected topology (then w stays 1 and push-sum is plain averaging)
//   exact  complete topology with uniform weights 1/N: every round computes the exact average,
//          i.e. AllReduce by gossip (for comparison only)
#include <optional>
#include <string>
#include <string_view>

#include "sgp/gossip/push_sum_config.hpp"
#include "sgp/topology/schedule.hpp"

namespace sgp::peer {

enum class Algorithm { sgp, osgp, local, dpsgd, exact };

Algorithm parse_algorithm(const std::string& text);  // InputError naming --algo
std::string_view algorithm_name(Algorithm algo);
bool communicates(Algorithm algo);
gossip::Mode gossip_mode(Algorithm algo);

// The schedule `algo` mixes with, derived from the topology file's. `self_weight` (the
// --self-weight mixing rate) overrides the file's weights for sgp and osgp. Throws InputError
// naming `source` when the topology does not fit: dpsgd needs every edge in both directions in
// each phase; exact needs a complete graph.
topology::Schedule mixing_schedule(Algorithm algo, const topology::Schedule& file_schedule,
                                   std::optional<double> self_weight, const std::string& source);

}  // namespace sgp::peer
