#include "sgp/gossip/push_sum_config.hpp"

#include <array>

namespace sgp::gossip {

std::span<const NamedValue<Mode>> names(Mode) {
  static constexpr std::array<NamedValue<Mode>, 2> table = {{
      {Mode::sync, "sync", "SGP: every round waits for every in-neighbour's message"},
      {Mode::overlap, "overlap", "OSGP: a communication thread mixes while the caller computes"},
  }};
  return table;
}

}  // namespace sgp::gossip
