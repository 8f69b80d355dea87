// sgp simulate's library: the sync population mixes as PushSumEngine does (the same schedule
// and initial vectors over the in-process transport: bit for bit where a peer has one
// in-neighbour per round, within float rounding where the engine adds arrivals in arrival
// order); consensus reaches the known mean; with 5% loss the running sums still reach it and
// plain push-sum is biased; the measured contraction of a ring is cos(pi / N); the least-squares
// workload approaches its known optimum.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "sgp/simulate/simulation.hpp"
#include "sgp/simulate/sync_population.hpp"
#include "sgp/topology/generator.hpp"
#include "sgp/transport/inproc_network.hpp"
#include "support/gossip_peer_runner.hpp"
#include "support/gossip_test_support.hpp"

using namespace sgp;

namespace {

topology::Schedule generated(topology::TopologyKind kind, int n,
                             std::optional<double> self_weight = std::nullopt) {
  topology::GeneratorOptions g;
  g.num_peers = n;
  g.self_weight = self_weight;
  return topology::generate_topology(kind, g);
}

// The simulator's z after `rounds` rounds from the gossip tests' initial vectors.
std::vector<std::vector<float>> simulated_z(const topology::Schedule& s, std::size_t dim,
                                            int rounds, std::vector<double>& weights) {
  simulate::PeerPool pool(2);
  simulate::SyncPopulation population(s, dim, pool);
  for (int r = 0; r < s.num_peers(); ++r) {
    const auto v = sgp::testing::initial_vector(r, s.num_peers(), dim);
    std::copy(v.begin(), v.end(), population.x(r).begin());
  }
  for (int k = 0; k < rounds; ++k) population.mix(k);
  std::vector<std::vector<float>> z(static_cast<std::size_t>(s.num_peers()),
                                    std::vector<float>(dim));
  for (int r = 0; r < s.num_peers(); ++r)
    population.debias(r, z[static_cast<std::size_t>(r)].data());
  weights = population.weights();
  return z;
}

simulate::SimulationResult run(const topology::Schedule& s, simulate::SimulationOptions o) {
  return simulate::simulate(s, o);
}

}  // namespace

TEST_CASE("sync simulation = PushSumEngine over the in-process transport, same schedule") {
  constexpr std::size_t kDim = 37;
  constexpr int kRounds = 9;
  struct Case {
    topology::TopologyKind kind;
    int n;
    bool bitwise;  // one in-neighbour per round: no order of additions to differ in
  };
  for (const Case c : {Case{topology::TopologyKind::kOnePeerExponential, 8, true},
                       Case{topology::TopologyKind::kRing, 5, true},
                       Case{topology::TopologyKind::kExponential, 6, false}}) {
    CAPTURE(topology::topology_kind_name(c.kind));
    const auto s = generated(c.kind, c.n, 0.4);
    transport::InProcNetwork net(c.n);
    gossip::PushSumConfig cfg;
    cfg.timeout = std::chrono::milliseconds(20000);
    const auto engine = sgp::testing::run_inproc(s, net, kDim, kRounds, cfg);
    std::vector<double> weights;
    const auto z = simulated_z(s, kDim, kRounds, weights);
    for (int r = 0; r < c.n; ++r) {
      CAPTURE(r);
      const auto& e = engine[static_cast<std::size_t>(r)];
      REQUIRE(e.error.empty());
      const auto& mine = z[static_cast<std::size_t>(r)];
      if (c.bitwise) {
        CHECK(std::memcmp(e.z.data(), mine.data(), kDim * sizeof(float)) == 0);
        CHECK(e.final_weight == weights[static_cast<std::size_t>(r)]);
      } else {
        for (std::size_t k = 0; k < kDim; ++k) {
          CHECK(mine[k] == doctest::Approx(e.z[k]).epsilon(1e-6));
        }
        CHECK(weights[static_cast<std::size_t>(r)] ==
              doctest::Approx(e.final_weight).epsilon(1e-12));
      }
    }
  }
}

TEST_CASE("consensus reaches the exact mean and keeps the mass, sync and async, 1 or 2 threads") {
  const auto s = generated(topology::TopologyKind::kExponential, 48);
  for (auto mode : {simulate::Mixing::sync, simulate::Mixing::async}) {
    simulate::SimulationOptions o;
    o.mode = mode;
    o.dim = 20;
    o.rounds = 120;
    o.threads = 1;
    const auto one = run(s, o);
    o.threads = 2;
    const auto two = run(s, o);
    // float32 (sync) keeps about 7 digits, double (async) about 16.
    const double floor = mode == simulate::Mixing::sync ? 1e-10 : 1e-24;
    CHECK(one.final_record.target_error < floor);
    CHECK(one.final_record.consensus_error < floor);
    CHECK(one.final_record.sum_of_weights == doctest::Approx(48.0).epsilon(1e-12));
    // The same seed gives the same run whatever the number of threads.
    CHECK(one.final_record.deviation_norm == two.final_record.deviation_norm);
  }
}

TEST_CASE("5% message loss: running sums reach the exact mean, plain push-sum does not") {
  const auto s = generated(topology::TopologyKind::kOnePeerExponential, 32);
  simulate::SimulationOptions o;
  o.mode = simulate::Mixing::async;
  o.dim = 16;
  o.rounds = 400;
  o.faults.drop = 0.05;
  o.faults.seed = 3;
  const auto exact = run(s, o);
  CHECK(exact.messages.lost > 0);
  CHECK(exact.final_record.target_error < 1e-20);
  o.running_sums = false;
  const auto plain = run(s, o);
  CHECK(plain.messages.lost > 0);
  CHECK(plain.final_record.consensus_error < 1e-20);  // they agree ...
  CHECK(plain.final_record.target_error > 1e-6);      // ... on the wrong value
  CHECK(plain.final_record.sum_of_weights < 31.0);    // mass is gone
  // Duplicates and delays on top: running sums still exact.
  o.running_sums = true;
  o.faults.duplicate = 0.05;
  o.faults.max_delay = 3;
  const auto faulty = run(s, o);
  CHECK(faulty.messages.duplicated > 0);
  CHECK(faulty.final_record.target_error < 1e-20);
}

TEST_CASE("a ring's measured contraction per period is its sigma, cos(pi / N)") {
  const int n = 16;
  const auto s = generated(topology::TopologyKind::kRing, n, 0.5);
  simulate::SimulationOptions o;
  o.dim = 4;
  o.rounds = 600;
  const auto result = run(s, o);
  REQUIRE(result.contraction.per_period.has_value());
  const double sigma = std::cos(M_PI / n);
  CHECK(std::log(*result.contraction.per_period) == doctest::Approx(std::log(sigma)).epsilon(0.05));
}

TEST_CASE("decentralized SGD on least squares approaches the known optimum") {
  const auto s = generated(topology::TopologyKind::kOnePeerExponential, 16);
  simulate::SimulationOptions o;
  o.workload = simulate::Workload::quadratic;
  o.dim = 32;
  o.rounds = 300;
  o.lr = 0.05;
  std::vector<simulate::RoundRecord> records;
  for (auto mode : {simulate::Mixing::sync, simulate::Mixing::async}) {
    o.mode = mode;
    records.clear();
    simulate::simulate(s, o, [&](const simulate::RoundRecord& r) { records.push_back(r); });
    REQUIRE(records.size() == 301);
    CHECK(*records.back().optimality_gap < 1e-3 * *records.front().optimality_gap);
    // Heterogeneous shards with a constant step keep the peers apart by O(lr) (DGD's bias).
    CHECK(records.back().consensus_error < 2e-2);
    CHECK(records.back().mean_peer_gap < 1e-2 * *records.front().mean_peer_gap);
  }
}
