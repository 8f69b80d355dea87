// agt: gradient tracking over asgp's engine (AsyncPushSum mixing [x; y] with running sums), with
// optim::UpdateRule in asgp's convention (the caller holds [z; y / w]), peers as threads over
// in-process transports with injected drops, duplicates and reordering. Known answers: the
// de-biased trackers agree on the mean of the current gradients; z reaches the exact minimiser
// of a sum of heterogeneous quadratics where asgp stalls at a floor; one peer is the plain
// optimizer.
#include <cmath>
#include <functional>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "sgp/compute/cpu_backend.hpp"
#include "sgp/config/engine_settings.hpp"
#include "sgp/config/settings.hpp"
#include "sgp/gossip/async_push_sum.hpp"
#include "sgp/gossip/control_message.hpp"
#include "sgp/model/sgd.hpp"
#include "sgp/optim/update_rule.hpp"
#include "sgp/topology/dot_file.hpp"
#include "sgp/transport/faulty_transport.hpp"
#include "sgp/transport/inproc_network.hpp"
#include "sgp/transport/inproc_transport.hpp"
#include "support/moving_weights.hpp"
#include "support/quadratics.hpp"
#include "support/text.hpp"

using namespace sgp;
using namespace std::chrono_literals;
using sgp::testing::contains;

namespace {

constexpr std::size_t kDim = 3;
constexpr int kPeers = 4;

// Peer i's gradient at z in round k (nothing else: the rule's weight decay is 0 here).
using GradientFn = std::function<std::vector<float>(int rank, int round, const float* z)>;

config::TrainConfig agt_config(config::Algorithm algo) {
  config::TrainConfig c;
  c.algo = algo;
  c.momentum = 0.0f;  // plain steps and no weight decay, unless a test asks for them
  c.nesterov = false;
  c.weight_decay = 0.0f;
  c.timeout_ms = 2000;
  return c;
}

struct Crash {
  int rank = -1;  // this rank stops without a word at `round` (none: -1)
  int round = 0;
};

struct PeerEnd {
  std::vector<float> z, tracker;  // de-biased, after finish()
  std::string error;
};

// `rounds` iterations of `config` at every peer of `schedule` (threads, asgp's engine on
// faulty in-process transports, x = 0), then finish(). Each iteration: what arrived is handled
// (idle), then the local step at the z the engine last gave, then the round: the step sees the
// w the round takes it with.
std::vector<PeerEnd> run_async_peers(const config::TrainConfig& config,
                                     const topology::Schedule& schedule, int rounds, float lr,
                                     const GradientFn& gradient, Crash crash = {}) {
  const int n = schedule.num_peers();
  transport::InProcNetwork network(n);
  const transport::FaultSpec faults{0.05, 0.01, 0.05, 0ms, 7};
  std::vector<PeerEnd> out(n);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        compute::CpuBackend backend(1);
        transport::InProcTransport inner(network, rank);
        transport::FaultyTransport faulty(inner, faults, gossip::is_control_header);
        const auto layout = optim::state_layout(config, kDim);
        compute::DeviceBuffer<float> x(backend, layout.total);
        model::Sgd sgd(backend, kDim, {config.momentum, config.weight_decay, config.nesterov});
        optim::UpdateRule rule(config, backend, layout, x.data(), sgd);
        backend.fill(x.data(), layout.total, 0.0f);
        rule.start();
        const auto gc = config::push_sum_config(config, rank, compute::DeviceKind::cpu, false);
        gossip::AsyncPushSum engine(backend, schedule, faulty, x.data(), layout.mixed, gc);
        rule.set_engine(&engine);
        for (int k = 0; k < rounds; ++k) {
          if (rank == crash.rank && k == crash.round) return;  // silent from now on
          engine.idle(1ms);
          auto g = gradient(rank, k, x.data());
          rule.local_step(g.data(), 1.0f, lr);
          rule.mix(k);
        }
        engine.finish();
        std::vector<float> mixed(layout.mixed);
        engine.debias(mixed.data());
        out[rank].z.assign(mixed.begin(), mixed.begin() + kDim);
        if (layout.mixed > kDim) out[rank].tracker.assign(mixed.begin() + kDim, mixed.end());
      } catch (const std::exception& e) {
        out[rank].error = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

// Gradients that change for the first `changing` rounds and then stay put, whatever z is.
std::vector<float> synthetic_gradient(int rank, int round, int changing) {
  const int k = std::min(round, changing);
  std::vector<float> g(kDim);
  for (std::size_t j = 0; j < kDim; ++j)
    g[j] = static_cast<float>((rank + 1) * std::sin(0.7 * (rank + 1) * (j + 1) + 0.05 * k));
  return g;
}

using testing::quadratic;

std::vector<float> quadratic_gradient(int rank, const float* z) {
  const auto q = quadratic(rank);
  std::vector<float> g(kDim);
  for (std::size_t j = 0; j < kDim; ++j) g[j] = static_cast<float>(q.a * (z[j] - q.b[j]));
  return g;
}

double max_distance(const std::vector<PeerEnd>& peers, const std::vector<double>& target) {
  double d = 0.0;
  for (const auto& p : peers)
    for (std::size_t j = 0; j < kDim; ++j) d = std::max(d, std::abs(p.z[j] - target[j]));
  return d;
}

topology::Schedule moving_weights() {
  return topology::parse_dot(sgp::testing::kMovingWeights, "<moving weights>");
}

}  // namespace

// Mixing moves the tracker numerators and w alike, and running sums lose nothing, so the
// numerators (held, and in flight) sum to the current gradients; once the peers agree, each
// de-biased tracker y_i / w_i is that sum over N. A tracker change not divided by w (the
// synchronous engines' convention) breaks it: asgp's w is far from 1 while mass is in flight.
TEST_CASE("agt: under drops, duplicates and reordering the trackers settle on the mean gradient") {
  const int changing = 60;
  const auto peers = run_async_peers(
      agt_config(config::Algorithm::agt), moving_weights(), 200, 0.0f,
      [](int rank, int round, const float*) { return synthetic_gradient(rank, round, changing); });
  std::vector<double> mean(kDim, 0.0);
  for (int r = 0; r < kPeers; ++r) {
    const auto g = synthetic_gradient(r, changing, changing);
    for (std::size_t j = 0; j < kDim; ++j) mean[j] += g[j] / kPeers;
  }
  for (int r = 0; r < kPeers; ++r) {
    CAPTURE(r);
    REQUIRE(peers[r].error.empty());
    REQUIRE(peers[r].tracker.size() == kDim);
    for (std::size_t j = 0; j < kDim; ++j)
      CHECK(std::abs(peers[r].tracker[j] - mean[j]) <= 1e-5 * (1.0 + std::abs(mean[j])));
  }
}

// With a constant step asgp's peers stall at a floor set by the heterogeneity; agt's reach the
// minimiser of the sum (to float rounding), messages lost, doubled and reordered notwithstanding.
TEST_CASE("agt reaches the exact optimum with a constant step under faults, where asgp stalls") {
  const auto gradient = [](int rank, int, const float* z) { return quadratic_gradient(rank, z); };
  const auto target = testing::quadratic_optimum(kPeers);
  // Nesterov momentum filters the tracker's numerator: y -> 0 keeps the optimum exact.
  auto with_momentum = agt_config(config::Algorithm::agt);
  with_momentum.momentum = 0.5f;
  with_momentum.nesterov = true;
  const auto agt_momentum = run_async_peers(with_momentum, moving_weights(), 500, 0.02f, gradient);
  const auto agt =
      run_async_peers(agt_config(config::Algorithm::agt), moving_weights(), 500, 0.05f, gradient);
  const auto asgp =
      run_async_peers(agt_config(config::Algorithm::asgp), moving_weights(), 500, 0.05f, gradient);
  for (int r = 0; r < kPeers; ++r) {
    CAPTURE(r);
    REQUIRE(agt[r].error.empty());
    REQUIRE(agt_momentum[r].error.empty());
    REQUIRE(asgp[r].error.empty());
  }
  const double agt_distance = max_distance(agt, target);
  const double asgp_distance = max_distance(asgp, target);
  const double momentum_distance = max_distance(agt_momentum, target);
  MESSAGE("largest |z_i - theta*|: agt " << agt_distance << ", with Nesterov momentum "
                                         << momentum_distance << ", asgp " << asgp_distance);
  CHECK(agt_distance < 1e-4);
  CHECK(momentum_distance < 1e-4);
  CHECK(asgp_distance > 1e-2);
}

// One peer: no neighbour, w stays 1, y is the local gradient: Nesterov SGD with weight decay on
// f, computed here in double.
TEST_CASE("one peer: agt is the plain optimizer") {
  const auto single = topology::parse_dot("digraph topology { 0; }", "<one peer>");
  const auto q = quadratic(1);
  const double lr = 0.1, mu = 0.8, wd = 0.05;
  auto config = agt_config(config::Algorithm::agt);
  config.momentum = 0.8f;
  config.nesterov = true;
  config.weight_decay = 0.05f;
  const auto peers = run_async_peers(
      config, single, 30, 0.1f, [](int, int, const float* z) { return quadratic_gradient(1, z); });
  REQUIRE(peers[0].error.empty());
  std::vector<double> z(kDim, 0.0), v(kDim, 0.0);
  for (int it = 0; it < 30; ++it)
    for (std::size_t j = 0; j < kDim; ++j) {
      const double g = q.a * (z[j] - q.b[j]) + wd * z[j];
      v[j] = mu * v[j] + g;
      z[j] -= lr * (g + mu * v[j]);
    }
  for (std::size_t j = 0; j < kDim; ++j)
    CHECK(peers[0].z[j] == doctest::Approx(z[j]).epsilon(1e-5));
}

// The survivors of a failure would restart from z with w = 1, rescaling their trackers: agt
// stops them with a clear error instead of training on with a tracker that no longer sums to
// the gradients.
TEST_CASE("agt is fail-stop: a silent peer ends the others with an I/O error") {
  const auto peers = run_async_peers(
      agt_config(config::Algorithm::agt), moving_weights(), 400, 0.05f,
      [](int rank, int, const float* z) { return quadratic_gradient(rank, z); }, {2, 30});
  for (int r = 0; r < kPeers; ++r) {
    if (r == 2) continue;
    CAPTURE(r);
    CHECK(contains(peers[r].error, "gradient tracking is fail-stop"));
  }
}

TEST_CASE("agt refuses what would take tracker mass away, naming the flag") {
  auto c = agt_config(config::Algorithm::agt);
  c.leave_on_term = true;
  CHECK_THROWS_WITH_AS(config::validate(c), doctest::Contains("--leave-on-term with --algo agt"),
                       InputError);
  c.leave_on_term = false;
  c.on_peer_failure = config::PeerFailure::go_on;
  CHECK_THROWS_WITH_AS(config::validate(c),
                       doctest::Contains("--on-peer-failure continue with --algo agt"), InputError);
  c = agt_config(config::Algorithm::agt);
  c.checkpoint_every = 10;
  CHECK_THROWS_AS(config::validate(c), InputError);
  CHECK(!config::info(config::Algorithm::agt).joins);
}
