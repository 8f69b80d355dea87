#pragma once
// The picture `sgp topology render` draws: a Graphviz DOT text (not a topology file) with one
// cluster per phase of the schedule, every rank in each, edges labelled with the weight pushed
// (p_ji) and nodes with the weight kept (p_ii), so a time-varying graph shows as it is.
#include <string>
#include <string_view>

#include "sgp/topology/schedule.hpp"

namespace sgp::topology {

// `title` (e.g. the file name) heads the picture. Weights are printed with 3 significant digits.
std::string drawing_dot(const Schedule& schedule, std::string_view title);

}  // namespace sgp::topology
