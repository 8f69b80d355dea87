// Repairing a schedule over the surviving peers (sgp/topology/repair.hpp).
#include <doctest/doctest.h>

#include "sgp/error.hpp"
#include "sgp/topology/analysis.hpp"
#include "sgp/topology/generator.hpp"
#include "sgp/topology/repair.hpp"

using namespace sgp::topology;

namespace {
Schedule generated(const char* kind, int n) {
  GeneratorOptions o;
  o.num_peers = n;
  return generate_topology(parse_topology_kind(kind), o);
}
std::vector<bool> all_but(int n, std::vector<int> gone) {
  std::vector<bool> live(n, true);
  for (int r : gone) live[r] = false;
  return live;
}
}  // namespace

TEST_CASE("a directed ring bypasses a dead peer with the same weight") {
  const auto repaired = repair_schedule(generated("ring", 4), all_but(4, {2}));
  REQUIRE(repaired.out_edges(1, 0).size() == 1);
  CHECK(repaired.out_edges(1, 0)[0].peer == 3);
  CHECK(repaired.out_edges(1, 0)[0].weight == doctest::Approx(0.5));
  CHECK(repaired.self_weight(1, 0) == doctest::Approx(0.5));
  CHECK(repaired.out_edges(2, 0).empty());
  CHECK(repaired.self_weight(2, 0) == 1.0);
  CHECK(repaired.in_neighbors(2, 0).empty());
  CHECK(repaired.in_neighbors(3, 0) == std::vector<int>{1});
}

TEST_CASE("bypassed weight goes through several dead peers and splits over their successors") {
  // One-peer exponential of 8 without 3 and 4: phase 0 (i -> i+1): 2 -> 3 -> 4 -> 5, so 2 -> 5.
  const auto live = all_but(8, {3, 4});
  const auto repaired = repair_schedule(generated("one-peer-exponential", 8), live);
  REQUIRE(repaired.out_edges(2, 0).size() == 1);
  CHECK(repaired.out_edges(2, 0)[0].peer == 5);
  // Exponential of 8 (i -> i+1, i+2, i+4, weight 1/4 each) without 3: 2's edge to 3 splits over
  // 3's successors 4, 5 and 7 (1/12 each); 4 and 5 already had edges from 2.
  const auto exp = repair_schedule(generated("exponential", 8), all_but(8, {3}));
  double to4 = 0, to5 = 0, to7 = 0;
  for (const auto& e : exp.out_edges(2, 0)) {
    if (e.peer == 4) to4 = e.weight;
    if (e.peer == 5) to5 = e.weight;
    if (e.peer == 7) to7 = e.weight;
  }
  CHECK(to4 == doctest::Approx(0.25 + 1.0 / 12));
  CHECK(to5 == doctest::Approx(1.0 / 12));
  CHECK(to7 == doctest::Approx(1.0 / 12));
  // Every kind stays strongly connected over the survivors (gone ranks are alone).
  for (const char* kind : {"ring", "one-peer-exponential", "exponential", "torus", "star"}) {
    CAPTURE(kind);
    const auto r = repair_schedule(generated(kind, 16), all_but(16, {0, 5, 6}));
    CHECK(union_strong_components(r) == 4);
  }
}

TEST_CASE("survivors that are not strongly connected are named, and none left is an error") {
  // Two separate 2-rings: {0, 1} and {2, 3}.
  std::vector<std::vector<std::vector<Push>>> edges = {
      {{{1, 0.5}}, {{0, 0.5}}, {{3, 0.5}}, {{2, 0.5}}}};
  Schedule split(4, edges, {{0.5, 0.5, 0.5, 0.5}});
  CHECK_THROWS_WITH_AS(repair_schedule(split, all_but(4, {})),
                       doctest::Contains("components {0, 1}, {2, 3}"), sgp::InputError);
  CHECK_THROWS_WITH_AS(repair_schedule(generated("ring", 3), all_but(3, {0, 1, 2})),
                       "no peer is left alive", sgp::InputError);
}
