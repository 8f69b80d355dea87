#pragma once
// Peer failures and joins in a simulation, with asgp's semantics (docs/asynchronous.md),
// idealized: every survivor learns of a failure in the round it
// happens. At the start of round r (after r rounds of mixing):
//   fail RANK@r: the rank's mass is gone (x and w set to zero; in async mode what was in
//     flight on every edge is given up); every survivor restarts from its z with w = 1; the
//     schedule is repaired over the live peers (topology::repair_schedule, as real peers do).
//   join RANK@r: a rank that failed earlier restarts; the first live rank after it (cyclic)
//     sponsors it with half of its mass (x and w halved, so both z are the sponsor's and the
//     totals are kept); the schedule is repaired over the new live set.
// Within a round, failures come first, then joins in ascending rank order.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sgp/topology/schedule.hpp"

namespace sgp::simulate {

struct PeerChange {
  enum class Kind { fail, join };
  Kind kind = Kind::fail;
  int rank = 0;
  std::int64_t round = 0;
  std::string item;  // as the user wrote it, for messages: "--fail 3@10"
};

// "RANK@ROUND[,RANK@ROUND...]" after `flag` ("--fail" or "--join"). InputError naming the item
// that is not of that form.
std::vector<PeerChange> parse_peer_changes(const std::string& text, PeerChange::Kind kind,
                                           const std::string& flag);

// What happens at the start of one round.
struct MembershipStep {
  std::int64_t round = 0;
  std::vector<int> failed;                  // ascending
  std::vector<std::pair<int, int>> joined;  // (joiner, sponsor), in the order applied
  std::vector<bool> live;                   // after the step
  topology::Schedule mixing;                // the schedule repaired over `live`
};

// The steps in round order, each with its live set, sponsors and repaired schedule.
// InputError naming the item: a rank or round out of range (0 <= round < rounds), a failure of
// a rank that is not live or a join of one that is, or a live set that cannot mix (nobody left,
// or the survivors not strongly connected).
std::vector<MembershipStep> plan_membership(const topology::Schedule& schedule,
                                            std::vector<PeerChange> changes, std::int64_t rounds);

}  // namespace sgp::simulate
