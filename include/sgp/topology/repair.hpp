#pragma once
// Mixing over the survivors when peers are gone (dead, excluded or left): every edge i -> j to a
// peer that is gone is bypassed, its weight spread evenly over the live peers j would have
// pushed to in that phase (through further gone peers if need be; if none, the next live rank
// after j), so every column still sums to 1 and whatever went through j still reaches someone.
// A gone peer keeps its own mass (self weight 1) and no edges.
#include <vector>

#include "sgp/topology/schedule.hpp"

namespace sgp::topology {

// live[r]: whether rank r still takes part. InputError when fewer than one rank is live, or when
// the live ranks' union graph is not strongly connected (the message names the components).
Schedule repair_schedule(const Schedule& schedule, const std::vector<bool>& live);

}  // namespace sgp::topology
