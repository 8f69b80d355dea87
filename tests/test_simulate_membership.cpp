// Peer failures and joins in sgp simulate (asgp's semantics): after a failure at round r the
// survivors converge to the mean of their z at round r (computed here from a run of r rounds of
// the populations themselves), the sum of w is the live count; a join keeps the totals (same
// target, same sum of w with one more peer) and gives the joiner its sponsor's z; changes that
// cannot happen are input errors naming the item.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <vector>

#include "sgp/error.hpp"
#include "sgp/gossip/consensus_vectors.hpp"
#include "sgp/simulate/async_population.hpp"
#include "sgp/simulate/peer_changes.hpp"
#include "sgp/simulate/simulation.hpp"
#include "sgp/simulate/sync_population.hpp"
#include "sgp/topology/generator.hpp"

using namespace sgp;
using simulate::PeerChange;

namespace {

topology::Schedule generated(topology::TopologyKind kind, int n) {
  topology::GeneratorOptions g;
  g.num_peers = n;
  return topology::generate_topology(kind, g);
}

template <typename Population>
void start_from_consensus_vectors(Population& p, std::uint64_t seed) {
  for (int r = 0; r < p.peers(); ++r) {
    const auto v = gossip::consensus_initial_vector(seed, r, p.peers(), p.dim());
    auto x = p.x(r);
    for (std::size_t k = 0; k < p.dim(); ++k) x[k] = v[k];
  }
}

// mean over the ranks other than `gone` of z = x / w (float32 z as debias makes it, for sync).
std::vector<double> survivors_mean(simulate::SyncPopulation& p, int gone) {
  std::vector<double> mean(p.dim(), 0.0);
  std::vector<float> z(p.dim());
  for (int r = 0; r < p.peers(); ++r) {
    if (r == gone) continue;
    p.debias(r, z.data());
    for (std::size_t k = 0; k < p.dim(); ++k) mean[k] += z[k];
  }
  for (double& m : mean) m /= p.peers() - 1;
  return mean;
}

std::vector<double> survivors_mean(simulate::AsyncPopulation& p, int gone) {
  std::vector<double> mean(p.dim(), 0.0);
  for (int r = 0; r < p.peers(); ++r) {
    if (r == gone) continue;
    const auto x = p.x(r);
    const double w = p.weights()[static_cast<std::size_t>(r)];
    for (std::size_t k = 0; k < p.dim(); ++k) mean[k] += x[k] * (1.0 / w);
  }
  for (double& m : mean) m /= p.peers() - 1;
  return mean;
}

double relative_distance(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0.0, n = 0.0;
  for (std::size_t k = 0; k < a.size(); ++k) {
    d += (a[k] - b[k]) * (a[k] - b[k]);
    n += b[k] * b[k];
  }
  return std::sqrt(d / n);
}

std::vector<PeerChange> changes(const std::string& fail, const std::string& join = "") {
  auto out = simulate::parse_peer_changes(fail, PeerChange::Kind::fail, "--fail");
  if (!join.empty()) {
    const auto joins = simulate::parse_peer_changes(join, PeerChange::Kind::join, "--join");
    out.insert(out.end(), joins.begin(), joins.end());
  }
  return out;
}

}  // namespace

TEST_CASE("sync: after rank 3 fails at round 5 the survivors reach the mean of their z then") {
  constexpr int kN = 8, kFailAt = 5, kJoinAt = 9;
  const auto s = generated(topology::TopologyKind::kExponential, kN);
  simulate::SimulationOptions o;
  o.dim = 12;
  o.rounds = 150;
  o.seed = 4;
  // The survivors' z after 5 rounds, from the population itself.
  simulate::PeerPool pool(2);
  simulate::SyncPopulation reference(s, o.dim, pool);
  start_from_consensus_vectors(reference, o.seed);
  std::vector<double> all_mean(o.dim, 0.0);
  for (int r = 0; r < kN; ++r)
    for (std::size_t k = 0; k < o.dim; ++k) all_mean[k] += reference.x(r)[k] / kN;
  for (int k = 0; k < kFailAt; ++k) reference.mix(k);
  const auto expected = survivors_mean(reference, 3);
  REQUIRE(relative_distance(expected, all_mean) > 1e-4);  // rank 3 took something with it

  for (const bool rejoin : {false, true}) {
    CAPTURE(rejoin);
    o.changes = changes("3@5", rejoin ? "3@9" : "");
    std::map<std::int64_t, simulate::RoundRecord> records;
    const auto result =
        simulate::simulate(s, o, [&](const simulate::RoundRecord& r) { records[r.round] = r; });
    CHECK(relative_distance(result.target, expected) < 1e-15);
    CHECK(result.final_record.target_error < 1e-10);
    CHECK(result.final_record.consensus_error < 1e-10);
    CHECK(records.at(kFailAt - 1).live == kN);
    CHECK(records.at(kFailAt - 1).sum_of_weights == doctest::Approx(kN).epsilon(1e-12));
    // The dead rank's mass is gone, each survivor restarted from z with w = 1.
    CHECK(records.at(kFailAt).live == kN - 1);
    CHECK(records.at(kFailAt).sum_of_weights == kN - 1);
    // A join shares a sponsor's mass: one more peer, the same total.
    CHECK(records.at(kJoinAt).live == (rejoin ? kN : kN - 1));
    CHECK(result.final_record.live == (rejoin ? kN : kN - 1));
    CHECK(result.final_record.sum_of_weights == doctest::Approx(kN - 1).epsilon(1e-12));
  }
}

TEST_CASE("async with 5% loss: after a failure the survivors reach the mean of their z then") {
  constexpr int kN = 16, kFailAt = 7;
  const auto s = generated(topology::TopologyKind::kOnePeerExponential, kN);
  simulate::SimulationOptions o;
  o.mode = simulate::Mixing::async;
  o.dim = 8;
  o.rounds = 300;
  o.faults.drop = 0.05;
  o.faults.seed = 2;
  o.changes = changes("3@7", "3@40");
  // The same rounds, message fates and initial vectors: apply due totals at round 7, then fail.
  simulate::PeerPool pool(1);
  simulate::AsyncPopulation reference(s, o.dim, true, o.faults, pool);
  start_from_consensus_vectors(reference, o.seed);
  for (int r = 0; r < kFailAt; ++r) {
    reference.deliver(r);
    reference.push(r);
  }
  reference.deliver(kFailAt);
  const auto expected = survivors_mean(reference, 3);
  const auto result = simulate::simulate(s, o);
  CHECK(result.messages.lost > 0);
  CHECK(relative_distance(result.target, expected) < 1e-14);
  CHECK(result.final_record.target_error < 1e-20);
  CHECK(result.final_record.live == kN);
}

TEST_CASE("a joiner gets half of its sponsor's mass: the same z, the totals kept") {
  const auto s = generated(topology::TopologyKind::kExponential, 6);
  simulate::PeerPool pool(2);
  auto totals = [](auto& p) {
    double sum = 0.0;
    for (int r = 0; r < p.peers(); ++r)
      for (auto v : p.x(r)) sum += v;
    return std::pair(sum, std::accumulate(p.weights().begin(), p.weights().end(), 0.0));
  };
  simulate::SyncPopulation sync(s, 10, pool);
  start_from_consensus_vectors(sync, 1);
  for (int k = 0; k < 3; ++k) sync.mix(k);
  sync.remove(2);
  const auto before = totals(sync);
  sync.share(3, 2);
  CHECK(totals(sync) == before);
  std::vector<float> z2(10), z3(10);
  sync.debias(2, z2.data());
  sync.debias(3, z3.data());
  CHECK(std::memcmp(z2.data(), z3.data(), sizeof(float) * 10) == 0);

  simulate::AsyncPopulation async(s, 10, true, {}, pool);
  start_from_consensus_vectors(async, 1);
  for (int k = 0; k < 3; ++k) {
    async.deliver(k);
    async.push(k);
  }
  async.remove(2);
  const auto async_before = totals(async);
  async.share(3, 2);
  CHECK(totals(async) == async_before);
  CHECK(async.weights()[2] == async.weights()[3]);
  for (std::size_t k = 0; k < 10; ++k) CHECK(async.x(2)[k] == async.x(3)[k]);
}

TEST_CASE("least squares after a failure approaches the survivors' optimum") {
  const auto s = generated(topology::TopologyKind::kOnePeerExponential, 16);
  simulate::SimulationOptions o;
  o.workload = simulate::Workload::quadratic;
  o.dim = 16;
  o.rounds = 300;
  o.lr = 0.05;
  o.changes = changes("5@100,6@100");
  simulate::QuadraticProblem all(o.seed, 16, o.dim, o.spread);
  for (auto mode : {simulate::Mixing::sync, simulate::Mixing::async}) {
    o.mode = mode;
    std::map<std::int64_t, simulate::RoundRecord> records;
    const auto result =
        simulate::simulate(s, o, [&](const simulate::RoundRecord& r) { records[r.round] = r; });
    // The survivors' f has another optimum than everyone's, and that is where they go.
    CHECK(relative_distance(result.target, all.optimum()) > 1e-3);
    CHECK(*result.final_record.optimality_gap < 1e-3 * *records.at(100).optimality_gap);
    CHECK(result.final_record.live == 14);
  }
}

TEST_CASE("membership changes that cannot happen are input errors naming the item") {
  const auto s = generated(topology::TopologyKind::kRing, 4);
  struct Case {
    std::string fail, join, says;
  };
  for (const auto& c : {
           Case{"4@1", "", "--fail 4@1: rank 4 is not one of the 4 peers"},
           Case{"1@10", "", "--fail 1@10: round 10 is not within the run's rounds (0..9)"},
           Case{"1@2,1@3", "", "--fail 1@3: rank 1 is not live at round 3"},
           Case{"1@2", "2@4", "--join 2@4: rank 2 is live at round 4"},
           Case{"1@2", "1@2", "--join 1@2: rank 1 is live at round 2"},
           Case{"0@1,1@1,2@1,3@1", "", "--fail 3@1: no peer is left alive"},
       }) {
    CAPTURE(c.fail);
    CHECK_THROWS_WITH_AS(simulate::plan_membership(s, changes(c.fail, c.join), 10),
                         doctest::Contains(c.says.c_str()), InputError);
  }
  for (const char* bad : {"3", "a@1", "1@", "1@2,", "-1@x"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(simulate::parse_peer_changes(bad, PeerChange::Kind::fail, "--fail"),
                         doctest::Contains("expected RANK@ROUND"), InputError);
  }
  // A plan names who sponsors whom: the first live rank after the joiner.
  const auto plan = simulate::plan_membership(s, changes("1@2,2@2", "1@5"), 10);
  REQUIRE(plan.size() == 2);
  CHECK(plan[0].failed == std::vector<int>{1, 2});
  CHECK(plan[1].joined == std::vector<std::pair<int, int>>{{1, 3}});
}
