// Issue 35's update rules (peer/update_rule.hpp, gossip/periodic_average.hpp) on inputs whose
// right answer is known: quadratics f_i(z) = a_i / 2 |z - b_i|^2, whose sum is minimised at
// sum a_i b_i / sum a_i; one peer (the rules reduce to known recurrences, computed here in
// double); several peers in threads over the in-process transport on a time-varying digraph
// whose weights move w, in the synchronous engine and in the overlap engine (ogt, osgp: messages
// applied a round late).
#include <cmath>
#include <functional>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "sgp/compute/cpu_backend.hpp"
#include "sgp/config/settings.hpp"
#include "sgp/error.hpp"
#include "sgp/gossip/mixer.hpp"
#include "sgp/gossip/periodic_average.hpp"
#include "sgp/gossip/ring_allreduce.hpp"
#include "sgp/model/sgd.hpp"
#include "sgp/optim/update_rule.hpp"
#include "sgp/topology/dot_file.hpp"
#include "sgp/transport/inproc_network.hpp"
#include "sgp/transport/inproc_transport.hpp"
#include "support/moving_weights.hpp"
#include "support/quadratics.hpp"
#include "support/text.hpp"

using namespace sgp;

namespace {

constexpr std::size_t kDim = 3;

using testing::Quadratic;
using testing::quadratic;

config::TrainConfig rule_config(config::Algorithm algo, float momentum = 0.0f,
                                bool nesterov = false, float weight_decay = 0.0f) {
  config::TrainConfig c;
  c.algo = algo;
  c.momentum = momentum;
  c.nesterov = nesterov;
  c.weight_decay = weight_decay;
  return c;
}

// One peer's state buffer, optimizer and rule, starting from x0 (kDim values).
struct PeerState {
  compute::CpuBackend backend;
  optim::StateLayout layout;
  compute::DeviceBuffer<float> x;
  model::Sgd sgd;
  optim::UpdateRule rule;

  PeerState(const config::TrainConfig& c, const std::vector<float>& x0)
      : layout(optim::state_layout(c, kDim)),
        x(backend, layout.total),
        sgd(backend, kDim, {c.momentum, c.weight_decay, c.nesterov}),
        rule(c, backend, layout, x.data(), sgd) {
    x.upload(x0);
    rule.start();
  }

  // One iteration with f = q at z = scale x; returns the gradient the rule used (with weight
  // decay).
  std::vector<float> iterate(const Quadratic& q, float lr, float scale) {
    std::vector<float> g(kDim);
    for (std::size_t j = 0; j < kDim; ++j)
      g[j] = static_cast<float>(q.a * (scale * x.data()[j] - q.b[j]));
    rule.local_step(g.data(), scale, lr);
    return g;
  }
};

// Runs body(rank) for ranks 0..n-1 on threads; rethrows the first failure.
void on_threads(int n, const std::function<void(int)>& body) {
  std::vector<std::exception_ptr> errors(n);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        body(rank);
      } catch (...) {
        errors[rank] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// What each peer saw at each iteration, after its local step: its tracker and the direction
// the tracker follows (the local optimizer's: g + beta v with Nesterov, else v); after its round:
// its tracker again and how many in-neighbour messages its engine had applied so far.
struct Trace {
  std::vector<std::vector<std::vector<float>>> tracker, direction;  // [iteration][rank]
  std::vector<std::vector<std::vector<float>>> tracker_after_round;
  std::vector<std::vector<std::uint64_t>> applied;
};

// Runs `iterations` iterations of `config` at the schedule's peers in threads (peer i with
// quadratic(i), from x = 0); returns each peer's final z.
std::vector<std::vector<float>> run_peers(const config::TrainConfig& config,
                                          const topology::Schedule& schedule, int iterations,
                                          float lr, Trace* trace = nullptr) {
  const int n = schedule.num_peers();
  transport::InProcNetwork network(n);
  std::vector<std::vector<float>> z(n);
  if (trace) {
    trace->tracker.assign(iterations, std::vector<std::vector<float>>(n));
    trace->direction = trace->tracker;
    trace->tracker_after_round = trace->tracker;
    trace->applied.assign(iterations, std::vector<std::uint64_t>(n));
  }
  on_threads(n, [&](int rank) {
    transport::InProcTransport transport(network, rank);
    PeerState p(config, std::vector<float>(kDim, 0.0f));
    gossip::PushSumConfig gc;
    gc.mode = config::info(config.algo).mode;  // osgp and ogt: the overlap engine
    gc.tau = config.tau;
    gc.global_average_every = config.global_average_every;
    gc.timeout = std::chrono::milliseconds(20000);
    auto engine =
        gossip::make_mixer(p.backend, schedule, transport, p.x.data(), p.layout.mixed, gc);
    p.rule.set_engine(engine.get());
    for (int it = 0; it < iterations; ++it) {
      const auto scale = static_cast<float>(*engine->z_scale());
      const auto g = p.iterate(quadratic(rank), lr, scale);
      if (trace) {
        const float* v = p.sgd.velocity().data();
        for (std::size_t j = 0; j < kDim; ++j)
          trace->direction[it][rank].push_back(config.nesterov ? g[j] + config.momentum * v[j]
                                                               : v[j]);
        trace->tracker[it][rank].assign(p.rule.tracker(), p.rule.tracker() + kDim);
      }
      p.rule.mix(it);
      if (trace) {
        trace->tracker_after_round[it][rank].assign(p.rule.tracker(), p.rule.tracker() + kDim);
        trace->applied[it][rank] = engine->metrics().messages_received;
      }
    }
    engine->finish();
    const auto scale = *engine->z_scale();
    for (std::size_t j = 0; j < kDim; ++j)
      z[rank].push_back(static_cast<float>(scale * p.x.data()[j]));
  });
  return z;
}

double max_distance(const std::vector<std::vector<float>>& z, const std::vector<double>& target) {
  double d = 0.0;
  for (const auto& zi : z)
    for (std::size_t j = 0; j < kDim; ++j) d = std::max(d, std::abs(zi[j] - target[j]));
  return d;
}

// Heavy-ball / Nesterov SGD in double on quadratic q with weight decay: the plain optimizer
// (sgd_update's arithmetic).
std::vector<double> plain_optimizer(const Quadratic& q, int iterations, double lr, double mu,
                                    bool nesterov, double wd) {
  std::vector<double> z(kDim, 0.5), v(kDim, 0.0);
  for (int it = 0; it < iterations; ++it)
    for (std::size_t j = 0; j < kDim; ++j) {
      const double g = q.a * (z[j] - q.b[j]) + wd * z[j];
      v[j] = mu * v[j] + g;
      z[j] -= lr * (nesterov ? g + mu * v[j] : v[j]);
    }
  return z;
}

}  // namespace

TEST_CASE("one peer: gt is the plain optimizer (y is its momentum direction)") {
  for (bool nesterov : {false, true}) {
    CAPTURE(nesterov);
    const double beta = 0.8, lr = 0.1;
    PeerState p(rule_config(config::Algorithm::gt, 0.8f, nesterov, 0.05f),
                std::vector<float>(kDim, 0.5f));
    const auto q = quadratic(1);
    std::vector<double> v(kDim, 0.0);
    for (int it = 0; it < 30; ++it) {
      const auto g = p.iterate(q, static_cast<float>(lr), 1.0f);
      for (std::size_t j = 0; j < kDim; ++j) {  // momentum tracking: y = u, v <- beta v + g
        v[j] = beta * v[j] + g[j];
        const double u = nesterov ? g[j] + beta * v[j] : v[j];
        CHECK(p.rule.tracker()[j] == doctest::Approx(u).epsilon(1e-5));
      }
      p.rule.mix(it);
    }
    const auto expected = plain_optimizer(q, 30, lr, beta, nesterov, 0.05);
    for (std::size_t j = 0; j < kDim; ++j)
      CHECK(p.x.data()[j] == doctest::Approx(expected[j]).epsilon(1e-5));
  }
}

// With one peer z_after = z_half, so d = (z_before - z_after) / lr is the step's own direction:
// heavy ball d = g + beta m, Nesterov d = g + beta (beta m + g); then m <- beta m + (1 - beta) d.
TEST_CASE("one peer: quasi-global momentum is the recurrence m <- beta m + (1 - beta) d") {
  for (bool nesterov : {false, true}) {
    CAPTURE(nesterov);
    const double beta = 0.9, lr = 0.05, wd = 0.01;
    auto config = rule_config(config::Algorithm::sgp, 0.9f, nesterov, 0.01f);
    config.momentum_kind = config::MomentumKind::quasi_global;
    PeerState qg(config, std::vector<float>(kDim, 0.5f));
    const auto q = quadratic(2);
    std::vector<double> z(kDim, 0.5), m(kDim, 0.0);
    for (int it = 0; it < 40; ++it) {
      qg.iterate(q, static_cast<float>(lr), 1.0f);
      qg.rule.mix(it);
      for (std::size_t j = 0; j < kDim; ++j) {
        const double g = q.a * (z[j] - q.b[j]) + wd * z[j];
        const double d = nesterov ? g + beta * (beta * m[j] + g) : g + beta * m[j];
        z[j] -= lr * d;
        m[j] = beta * m[j] + (1.0 - beta) * d;
      }
    }
    for (std::size_t j = 0; j < kDim; ++j) {
      CHECK(qg.x.data()[j] == doctest::Approx(z[j]).epsilon(1e-5));
      CHECK(qg.sgd.velocity().data()[j] == doctest::Approx(m[j]).epsilon(1e-4));
    }
  }
}

// One peer's exact average is its own z: every H steps u <- beta_s u + (z_prev - z) / lr,
// z <- z_prev - lr u, z_prev <- z.
TEST_CASE("one peer: slow momentum is SlowMo's outer step at every H-th iteration") {
  auto config = rule_config(config::Algorithm::sgp);
  config.global_average_every = 3;
  config.slow_momentum = 0.6;
  PeerState p(config, std::vector<float>(kDim, 0.5f));
  const auto q = quadratic(3);
  const double lr = 0.1, beta = 0.6;
  std::vector<double> z(kDim, 0.5), anchor = z, u(kDim, 0.0);
  for (int it = 0; it < 15; ++it) {
    p.iterate(q, static_cast<float>(lr), 1.0f);
    p.rule.mix(it);
    for (std::size_t j = 0; j < kDim; ++j) z[j] -= lr * q.a * (z[j] - q.b[j]);
    if ((it + 1) % 3 == 0) {
      for (std::size_t j = 0; j < kDim; ++j) {
        u[j] = beta * u[j] + (anchor[j] - z[j]) / lr;
        z[j] = anchor[j] = anchor[j] - lr * u[j];
      }
    }
  }
  for (std::size_t j = 0; j < kDim; ++j)
    CHECK(p.x.data()[j] == doctest::Approx(z[j]).epsilon(1e-5));
}

TEST_CASE("gt over push-sum: the trackers sum to the current directions after every round") {
  const auto schedule = topology::parse_dot(sgp::testing::kMovingWeights, "<moving weights>");
  Trace trace;
  run_peers(rule_config(config::Algorithm::gt, 0.9f, true, 0.01f), schedule, 40, 0.02f, &trace);
  for (int it = 0; it < 40; ++it) {
    CAPTURE(it);
    for (std::size_t j = 0; j < kDim; ++j) {
      double y = 0.0, u = 0.0, scale = 0.0;  // float rounding grows with the terms, not the sum
      for (int rank = 0; rank < 4; ++rank) {
        y += trace.tracker[it][rank][j];
        u += trace.direction[it][rank][j];
        scale += std::abs(trace.direction[it][rank][j]);
      }
      CHECK(std::abs(y - u) <= 1e-5 * (1.0 + scale));
    }
  }
}

// With a constant step, plain push-sum SGD stalls at a floor set by the heterogeneity; gradient
// tracking reaches the minimiser of the sum (to float rounding), in the synchronous engine and
// in the overlap engine, whose messages land up to a round late.
TEST_CASE("gt and ogt reach the exact optimum with a constant step, where sgp and osgp stall") {
  const auto schedule = topology::parse_dot(sgp::testing::kMovingWeights, "<moving weights>");
  const auto target = testing::quadratic_optimum(4);
  using config::Algorithm;
  const std::pair<Algorithm, Algorithm> pairs[] = {{Algorithm::gt, Algorithm::sgp},
                                                   {Algorithm::ogt, Algorithm::osgp}};
  for (const auto& pair : pairs) {
    const Algorithm tracking = pair.first;
    const Algorithm plain = pair.second;
    CAPTURE(name_of(tracking));
    const double exact =
        max_distance(run_peers(rule_config(tracking), schedule, 400, 0.1f), target);
    // With Nesterov momentum (tracked, not a filter of y): still exact.
    const double momentum =
        max_distance(run_peers(rule_config(tracking, 0.5f, true), schedule, 400, 0.05f), target);
    const double floor = max_distance(run_peers(rule_config(plain), schedule, 400, 0.1f), target);
    MESSAGE("largest |z_i - theta*|: " << name_of(tracking) << " " << exact << ", with momentum "
                                       << momentum << "; " << name_of(plain) << " " << floor);
    CHECK(exact <= 1e-5);
    CHECK(momentum <= 1e-5);
    CHECK(floor > 1e-2);
  }
}

// ogt: osgp's engine applies an in-neighbour's round-r message at round r or, with tau = 1, one
// round late, while the next step already changes y. What is conserved after every round r is
// the trackers held plus the tracker mass in flight:
//   sum_i y_i(after round r) + sum over round-r messages s -> i that i has not applied yet of
//   p_is y_s(sent) = sum_i u_i(r),
// y_s(sent) being s's tracker after its step r (the snapshot its round sends). On the moving-
// weights digraph each peer hears one in-neighbour a round, so after round r it has applied r
// messages (round r's still in flight) or r + 1.
TEST_CASE("ogt: the trackers held plus the mass in flight sum to the current directions") {
  const auto schedule = topology::parse_dot(sgp::testing::kMovingWeights, "<moving weights>");
  const int iterations = 40;
  Trace trace;
  run_peers(rule_config(config::Algorithm::ogt, 0.9f, true, 0.01f), schedule, iterations, 0.02f,
            &trace);
  int in_flight = 0;
  for (int it = 0; it < iterations; ++it) {
    CAPTURE(it);
    std::vector<double> total(kDim, 0.0), u(kDim, 0.0), scale(kDim, 0.0);
    for (int sender = 0; sender < 4; ++sender) {
      for (const auto& push : schedule.out_edges(sender, it)) {
        const auto applied = trace.applied[it][push.peer];
        REQUIRE((applied == static_cast<std::uint64_t>(it) || applied == it + 1u));
        if (applied == it + 1u) continue;
        ++in_flight;
        for (std::size_t j = 0; j < kDim; ++j)
          total[j] += push.weight * trace.tracker[it][sender][j];
      }
    }
    for (int rank = 0; rank < 4; ++rank) {
      for (std::size_t j = 0; j < kDim; ++j) {
        total[j] += trace.tracker_after_round[it][rank][j];
        u[j] += trace.direction[it][rank][j];
        scale[j] += std::abs(trace.direction[it][rank][j]);
      }
    }
    for (std::size_t j = 0; j < kDim; ++j)
      CHECK(std::abs(total[j] - u[j]) <= 1e-5 * (1.0 + scale[j]));
  }
  // In each round some peer snapshots before its in-neighbour has sent: the delay is exercised.
  MESSAGE(in_flight << " of " << 4 * iterations << " messages in flight after their round");
  CHECK(in_flight > 0);
}

namespace {

// Each peer's x after `rounds` steps of a Mixer made by `make` over the in-process transport,
// from x_i = distinct values (n elements); `z_before` gets each peer's z before every step.
std::vector<std::vector<float>> mix_rounds(
    const topology::Schedule& schedule, std::size_t n, int rounds,
    const std::function<std::unique_ptr<gossip::Mixer>(compute::Backend&, transport::Transport&,
                                                       float*)>& make,
    std::vector<std::vector<std::vector<float>>>* z_before = nullptr) {
  const int peers = schedule.num_peers();
  transport::InProcNetwork network(peers);
  std::vector<std::vector<float>> out(peers);
  if (z_before) z_before->assign(rounds, std::vector<std::vector<float>>(peers));
  on_threads(peers, [&](int rank) {
    compute::CpuBackend backend;
    transport::InProcTransport transport(network, rank);
    std::vector<float> x(n);
    for (std::size_t j = 0; j < n; ++j) x[j] = std::sin(0.37f * (rank + 1) * (j + 1)) * (rank + 1);
    auto engine = make(backend, transport, x.data());
    for (int it = 0; it < rounds; ++it) {
      if (z_before) {
        (*z_before)[it][rank].resize(n);
        engine->debias((*z_before)[it][rank].data());
      }
      engine->step(it);
      // a local change between rounds, as a training step makes
      for (auto& v : x) v *= 0.99f;
    }
    engine->finish();
    out[rank] = x;
  });
  return out;
}

}  // namespace

TEST_CASE("PGA: an exact round leaves every peer w = 1 and x = the arithmetic mean of z") {
  const auto schedule = topology::parse_dot(sgp::testing::kMovingWeights, "<moving weights>");
  // Several chunks, so that the lanes hold back messages of either engine.
  const std::size_t n = 1000;
  gossip::PushSumConfig gc;
  gc.chunk_elements = 128;
  gc.timeout = std::chrono::milliseconds(20000);
  // H = 3 with fp16 gossip: the exact rounds stay float32.
  for (int every : {2, 3}) {
    CAPTURE(every);
    gc.global_average_every = every;
    gc.compression = every == 3 ? gossip::Compression::fp16 : gossip::Compression::none;
    const int rounds = 2 * every;  // the last round is exact
    std::vector<std::vector<std::vector<float>>> z;
    const auto x = mix_rounds(
        schedule, n, rounds,
        [&](compute::Backend& b, transport::Transport& t, float* x) {
          return gossip::make_mixer(b, schedule, t, x, n, gc);
        },
        &z);
    for (std::size_t j = 0; j < n; ++j) {
      double mean = 0.0;
      for (int rank = 0; rank < 4; ++rank) mean += z[rounds - 1][rank][j];
      mean /= 4.0;
      // x was scaled by 0.99 after the last round.
      for (int rank = 0; rank < 4; ++rank) {
        CHECK(x[rank][j] == x[0][j]);
        CHECK(x[rank][j] == doctest::Approx(0.99 * mean).epsilon(1e-5));
      }
    }
    // The gossip rounds in between moved w: the z's averaged were not x's.
    bool weight_moved = false;
    for (int rank = 0; rank < 4; ++rank)
      for (std::size_t j = 0; j < n; ++j) {
        weight_moved |=
            std::abs(z[rounds - 1][rank][j] - z[0][rank][j] * std::pow(0.99f, rounds - 1)) > 1e-3;
      }
    CHECK(weight_moved);
  }
}

TEST_CASE("PGA with H = 1 is the ring allreduce, bit for bit") {
  const auto schedule = topology::parse_dot(sgp::testing::kMovingWeights, "<moving weights>");
  const std::size_t n = 1001;
  gossip::PushSumConfig gc;
  gc.chunk_elements = 100;
  gc.timeout = std::chrono::milliseconds(20000);
  const auto ring =
      mix_rounds(schedule, n, 3, [&](compute::Backend& b, transport::Transport& t, float* x) {
        return std::make_unique<gossip::RingAllReduce>(b, 4, t, x, n, gc);
      });
  gc.global_average_every = 1;
  const auto pga =
      mix_rounds(schedule, n, 3, [&](compute::Backend& b, transport::Transport& t, float* x) {
        return gossip::make_mixer(b, schedule, t, x, n, gc);
      });
  CHECK(pga == ring);
}

TEST_CASE("combinations the rules do not have are refused, naming the flag") {
  using testing::contains;
  auto refusal = [](const config::TrainConfig& c) {
    try {
      config::validate(c);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  auto c = rule_config(config::Algorithm::sgp);
  c.slow_momentum = 0.5;
  CHECK(contains(refusal(c), "--slow-momentum"));
  c.global_average_every = 4;
  CHECK(refusal(c) == "accepted");
  c.gossip_every = 2;
  CHECK(contains(refusal(c), "--gossip-every 1"));
  for (auto algo : {config::Algorithm::osgp, config::Algorithm::asgp, config::Algorithm::allreduce,
                    config::Algorithm::gt, config::Algorithm::ogt, config::Algorithm::local}) {
    auto d = rule_config(algo);
    d.global_average_every = 2;
    CHECK(contains(refusal(d), "--global-average-every"));
  }
  for (auto algo : {config::Algorithm::gt, config::Algorithm::ogt}) {
    auto tracking = rule_config(algo);
    tracking.momentum_kind = config::MomentumKind::quasi_global;
    CHECK(contains(refusal(tracking), "--momentum-kind quasi-global with --algo"));
  }
  auto gt = rule_config(config::Algorithm::gt);
  gt.robust = gossip::Robust::clip;
  CHECK(contains(refusal(gt), "--robust clip"));
}
