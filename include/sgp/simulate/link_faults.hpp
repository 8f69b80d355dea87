#pragma once
// The simulator's in-process message layer decides each message's fate from a hash of (seed,
// round, sender, receiver): lost, delivered once or twice, each copy after a delay of whole
// rounds. No state and no order: the same seed gives the same faults whatever the number of
// threads.
#include <array>
#include <cstdint>

namespace sgp::simulate {

struct LinkFaults {
  double drop = 0.0;       // probability that a message is lost
  double duplicate = 0.0;  // probability that a delivered message arrives twice
  int max_delay = 0;       // each copy arrives 0..max_delay rounds late (uniform)
  std::uint64_t seed = 0;

  bool any() const { return drop > 0.0 || duplicate > 0.0 || max_delay > 0; }
};

struct MessageFate {
  int copies = 1;                  // 0: lost
  std::array<int, 2> delay{0, 0};  // rounds late, per copy
};

MessageFate message_fate(const LinkFaults& faults, std::int64_t round, int sender, int receiver);

}  // namespace sgp::simulate
