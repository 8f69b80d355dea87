// Topologies that average exactly after one period (hyper-hypercube, Base-(k+1)) and the random
// one-peer shift.
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "sgp/error.hpp"
#include "sgp/topology/analysis.hpp"
#include "sgp/topology/finite_time.hpp"
#include "sgp/topology/generator.hpp"
#include "sgp/topology/repair.hpp"

using namespace sgp::topology;
using sgp::InputError;

namespace {

Schedule make(TopologyKind kind, int n, int degree, std::uint64_t seed = 0) {
  GeneratorOptions options;
  options.num_peers = n;
  options.degree = degree;
  options.seed = seed;
  return generate_topology(kind, options);
}

// Every round symmetric (p_ij = p_ji, so doubly stochastic: the columns sum to 1 by the
// Schedule's own check), and no rank talks to more than k others.
void check_rounds(const Schedule& s, int k) {
  for (int p = 0; p < s.period(); ++p)
    for (int i = 0; i < s.num_peers(); ++i) {
      const auto& out = s.out_edges(i, p);
      REQUIRE(static_cast<int>(out.size()) <= k);
      REQUIRE(s.in_neighbors(i, p).size() == out.size());
      for (const Push& push : out) REQUIRE(s.push_weight(push.peer, i, p) == push.weight);
    }
}

// The period bound the construction promises: 2 log_(k+1)(N) + 2.
bool period_within_bound(const Schedule& s, int k) {
  const double bound = 2.0 * std::log(s.num_peers()) / std::log(k + 1.0) + 2.0;
  return s.period() <= bound + 1e-9;
}

bool every_prime_factor_at_most(int n, int limit) {
  for (int p = 2; p <= limit; ++p)
    while (n % p == 0) n /= p;
  return n == 1;
}

}  // namespace

TEST_CASE("Base-(k+1): exact average after one period for every N in 2..200 and k in 1..4") {
  for (int k = 1; k <= 4; ++k)
    for (int n = 2; n <= 200; ++n) {
      CAPTURE(k);
      CAPTURE(n);
      const Schedule s = make(TopologyKind::kBase, n, k);
      check_rounds(s, k);
      REQUIRE(period_within_bound(s, k));
      REQUIRE(averages_exactly(period_product(s)));
    }
}

TEST_CASE("hyper-hypercube: exact on every N in 2..200 whose prime factors are <= k+1") {
  int built = 0;
  for (int k = 1; k <= 4; ++k)
    for (int n = 2; n <= 200; ++n) {
      CAPTURE(k);
      CAPTURE(n);
      if (!every_prime_factor_at_most(n, k + 1)) {
        REQUIRE_THROWS_AS(make(TopologyKind::kHyperHypercube, n, k), InputError);
        continue;
      }
      const Schedule s = make(TopologyKind::kHyperHypercube, n, k);
      check_rounds(s, k);
      REQUIRE(period_within_bound(s, k));
      REQUIRE(averages_exactly(period_product(s)));
      ++built;
    }
  CHECK(built == 7 + 24 + 24 + 45);  // 2^a; 2^a 3^b (twice: 4 adds no prime); 2^a 3^b 5^c
}

TEST_CASE("hyper-hypercube: the fewest factors, and the rule in the refusal") {
  CHECK(hyper_hypercube_factors(8, 1) == std::vector<int>{2, 2, 2});
  CHECK(hyper_hypercube_factors(16, 3) == std::vector<int>{4, 4});
  CHECK(hyper_hypercube_factors(12, 3) == std::vector<int>{4, 3});
  CHECK(hyper_hypercube_factors(1, 2) == std::vector<int>{});
  CHECK_FALSE(hyper_hypercube_factors(6, 1).has_value());
  CHECK(make(TopologyKind::kHyperHypercube, 12, 3).period() == 2);
  // Round 0 of H_1(4): 0-1 and 2-3 average; round 1: 0-2 and 1-3 (weights 1/2).
  const Schedule s = make(TopologyKind::kHyperHypercube, 4, 1);
  CHECK(s.out_edges(0, 0) == std::vector<Push>{{1, 0.5}});
  CHECK(s.out_edges(0, 1) == std::vector<Push>{{2, 0.5}});
  try {
    make(TopologyKind::kHyperHypercube, 6, 1);
    FAIL("expected InputError");
  } catch (const InputError& e) {
    const std::string what = e.what();
    CHECK(what.find("every prime factor of the number of peers must be at most k+1 = 2") !=
          std::string::npos);
    CHECK(what.find("base") != std::string::npos);
  }
}

TEST_CASE("Base-2 on 6 peers: groups of 3, the merge weights, then across; period 4") {
  // Simple(6) takes 5 rounds (blocks 4 + 2); the split one 4: 6 = 2 * 3, two groups of 3 run
  // Simple(3) (0-1 average; 2 pairs with 0 at weight 2/3 = block sizes 2 : 3; 0-1 again), then
  // the pairs {0, 3}, {1, 4}, {2, 5} average across.
  const Schedule s = make(TopologyKind::kBase, 6, 1);
  CHECK(s.period() == 4);
  CHECK(s.out_edges(0, 0) == std::vector<Push>{{1, 0.5}});
  CHECK(s.out_edges(2, 0).empty());
  CHECK(s.out_edges(2, 1) == std::vector<Push>{{0, 2.0 / 3.0}});
  CHECK(s.self_weight(2, 1) == doctest::Approx(1.0 / 3.0));
  CHECK(s.self_weight(0, 1) == doctest::Approx(1.0 / 3.0));
  CHECK(s.out_edges(5, 1) == std::vector<Push>{{3, 2.0 / 3.0}});
  CHECK(s.out_edges(1, 1).empty());
  CHECK(s.out_edges(4, 2) == std::vector<Push>{{3, 0.5}});
  CHECK(s.out_edges(2, 3) == std::vector<Push>{{5, 0.5}});
  CHECK(exact_average_rounds(s) == 4);
}

TEST_CASE("exact kinds: --degree defaults to 1 and --self-weight is refused") {
  CHECK(make(TopologyKind::kBase, 25, 0) == make(TopologyKind::kBase, 25, 1));
  GeneratorOptions options;
  options.num_peers = 8;
  options.self_weight = 0.5;
  CHECK_THROWS_AS(generate_topology(TopologyKind::kBase, options), InputError);
  options.self_weight.reset();
  options.degree = -1;
  CHECK_THROWS_AS(generate_topology(TopologyKind::kBase, options), InputError);
  options.degree = 3;
  CHECK_THROWS_AS(generate_topology(TopologyKind::kOnePeerExponential, options), InputError);
  CHECK(generator_command_line(TopologyKind::kBase, options).find("base --peers 8 --degree 3") !=
        std::string::npos);
}

TEST_CASE("one-peer random shift: one seeded shift per round, the same for the same seed") {
  const Schedule s = make(TopologyKind::kOnePeerRandomShift, 25, 0, 7);
  CHECK(s.period() == kRandomShiftPeriod);
  std::set<int> shifts;
  for (int p = 0; p < s.period(); ++p) {
    const auto& out0 = s.out_edges(0, p);
    REQUIRE(out0.size() == 1);
    const int a = out0[0].peer;
    REQUIRE(a >= 1);
    shifts.insert(a);
    for (int i = 0; i < 25; ++i) {
      REQUIRE(s.out_edges(i, p) == std::vector<Push>{{(i + a) % 25, 0.5}});
      REQUIRE(s.self_weight(i, p) == 0.5);
    }
  }
  CHECK(shifts.size() > 10);  // 64 draws from 24 values
  CHECK(make(TopologyKind::kOnePeerRandomShift, 25, 0, 7) == s);
  CHECK_FALSE(make(TopologyKind::kOnePeerRandomShift, 25, 0, 8) == s);
  CHECK(union_strong_components(make(TopologyKind::kOnePeerRandomShift, 4, 0, 1)) == 1);
  CHECK(make(TopologyKind::kOnePeerRandomShift, 2, 0).period() == kRandomShiftPeriod);
}

TEST_CASE("describe reports the exact average, check's helper agrees; others are not exact") {
  const TopologyReport base = analyze_topology(make(TopologyKind::kBase, 12, 2), 100);
  REQUIRE(base.exact_after_rounds.has_value());
  CHECK(*base.exact_after_rounds == base.period);
  CHECK(format_report(base).find("exact average after") != std::string::npos);
  CHECK(format_report(base).find("maximum degree in a round: out 2, in 2") != std::string::npos);
  const Schedule one_peer = make(TopologyKind::kOnePeerExponential, 12, 0);
  CHECK_FALSE(exact_average_rounds(one_peer).has_value());
  CHECK_FALSE(analyze_topology(one_peer, 100).exact_after_rounds.has_value());
  CHECK(exact_average_rounds(make(TopologyKind::kOnePeerExponential, 16, 0)) == 4);
}

TEST_CASE("schedule repair: the survivors of base and the random shift still mix") {
  std::vector<bool> live(12, true);
  live[5] = false;
  for (const Schedule& s :
       {make(TopologyKind::kBase, 12, 1), make(TopologyKind::kOnePeerRandomShift, 12, 0, 3)}) {
    const Schedule repaired = repair_schedule(s, live);  // columns still sum to 1 (checked)
    CHECK(repaired.period() == s.period());
    CHECK(repaired.out_edges(5, 0).empty());
    for (int p = 0; p < repaired.period(); ++p)
      for (int i = 0; i < 12; ++i) CHECK(repaired.push_weight(i, 5, p) < 0.0);
    const auto groups = union_components(repaired);
    CHECK(groups.size() == 2);  // the 11 survivors, and rank 5 alone
  }
}

TEST_CASE("base with a degree of N - 1 or more: one round, everyone averages with everyone") {
  CHECK(make(TopologyKind::kBase, 5, 4).period() == 1);
  CHECK(make(TopologyKind::kBase, 5, 100) == make(TopologyKind::kBase, 5, 4));
  CHECK(make(TopologyKind::kBase, 7, 5).period() == 3);  // 7 = 6 + 1 in base 6
}
