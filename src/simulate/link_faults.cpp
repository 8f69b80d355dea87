#include "sgp/simulate/link_faults.hpp"

#include "sgp/data/seeded_random.hpp"

namespace sgp::simulate {
namespace {

using data::splitmix64;

// Uniform in [0, 1) from the top 53 bits.
double unit(std::uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

}  // namespace

MessageFate message_fate(const LinkFaults& faults, std::int64_t round, int sender, int receiver) {
  MessageFate fate;
  if (!faults.any()) return fate;
  std::uint64_t h = splitmix64(faults.seed ^ splitmix64(static_cast<std::uint64_t>(round)));
  h = splitmix64(h ^
                 (static_cast<std::uint64_t>(sender) << 32 | static_cast<std::uint32_t>(receiver)));
  if (unit(h) < faults.drop) return MessageFate{0, {0, 0}};
  h = splitmix64(h);
  fate.copies = unit(h) < faults.duplicate ? 2 : 1;
  for (int& d : fate.delay) {
    h = splitmix64(h);
    d = static_cast<int>(h % static_cast<std::uint64_t>(faults.max_delay + 1));
  }
  return fate;
}

}  // namespace sgp::simulate
