// sgp simulate's decentralized optimizers (simulate/optimizer.hpp, issue 35) against answers
// known exactly:
// - gradient tracking reaches the optimum of a heterogeneous quadratic with a constant step
//   where sgp stalls, on an undirected ring, a directed ring and the one-peer exponential graph
//   (time-varying); sgp's floor and gt's rate are those of theory: sgp's floor from the fixed
//   point of its affine period map, gt's rate from the spectral radius of its linear iteration
//   (both computed here from the schedule's matrices and the problem's h_i and own optima);
// - asynchronous gt under loss, duplication and reordering reaches the optimum with running
//   sums, not without;
// - one peer: sgp is gradient descent, local and quasi-global momentum their exact recurrences,
//   gt with momentum the local one (y = g); with many, gt's momentum on y keeps the optimum;
// - gt's tracker sum is the sum of the current local gradients after every round (agt's too,
//   with every message delivered);
// - periodic global averaging: its rounds are the arithmetic mean; H = 1 is gradient descent on
//   f (the exact-average run); slow momentum with beta_s = 0 is PGA, with H = 1 heavy ball on f.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <vector>

#include "sgp/simulate/async_population.hpp"
#include "sgp/simulate/optimizer.hpp"
#include "sgp/simulate/simulation.hpp"
#include "sgp/simulate/sync_population.hpp"
#include "sgp/topology/generator.hpp"

using namespace sgp;
using simulate::SimulationOptions;

namespace {

using Matrix = std::vector<std::vector<double>>;
using Vector = std::vector<double>;

topology::Schedule generated(topology::TopologyKind kind, int n) {
  topology::GeneratorOptions g;
  g.num_peers = n;
  return topology::generate_topology(kind, g);
}

SimulationOptions quadratic(std::int64_t rounds, double lr, double spread) {
  SimulationOptions o;
  o.workload = simulate::Workload::quadratic;
  o.dim = 4;
  o.rounds = rounds;
  o.lr = lr;
  o.spread = spread;
  o.threads = 2;
  return o;
}

// Three peers whose weights are column- but not row-stochastic, so w moves.
topology::Schedule three_peers_moving_weights() {
  return topology::Schedule(3, {{{{1, 1.0 / 3}, {2, 1.0 / 3}}, {{2, 0.5}}, {{0, 0.5}}}},
                            {{1.0 / 3, 0.5, 0.5}});
}

// Gradient tracking on the quadratic workload with noisy gradients, 30 rounds.
SimulationOptions tracking_options() {
  SimulationOptions o = quadratic(30, 0.1, 5.0);
  o.noise = 0.5;
  o.optimizer.gradient_tracking = true;
  return o;
}

std::vector<simulate::RoundRecord> records(const topology::Schedule& s,
                                           const SimulationOptions& o) {
  std::vector<simulate::RoundRecord> out;
  simulate::simulate(s, o, [&](const simulate::RoundRecord& r) { out.push_back(r); });
  return out;
}

// A(t)[j][i] = p_ji: the mixing of round t (x_j <- sum_i p_ji x_i).
Matrix mixing(const topology::Schedule& s, std::int64_t t) {
  const auto n = static_cast<std::size_t>(s.num_peers());
  Matrix a(n, Vector(n, 0.0));
  for (int i = 0; i < s.num_peers(); ++i) {
    a[i][i] = s.self_weight(i, t);
    for (const auto& e : s.out_edges(i, t)) a[e.peer][i] += e.weight;
  }
  return a;
}

Vector times(const Matrix& a, const Vector& x) {
  Vector y(a.size(), 0.0);
  for (std::size_t j = 0; j < a.size(); ++j)
    for (std::size_t i = 0; i < x.size(); ++i) y[j] += a[j][i] * x[i];
  return y;
}

// Solves m x = b by Gaussian elimination with partial pivoting (m is small and regular).
Vector solve(Matrix m, Vector b) {
  const std::size_t n = b.size();
  for (std::size_t c = 0; c < n; ++c) {
    std::size_t p = c;
    for (std::size_t r = c + 1; r < n; ++r)
      if (std::abs(m[r][c]) > std::abs(m[p][c])) p = r;
    std::swap(m[c], m[p]);
    std::swap(b[c], b[p]);
    for (std::size_t r = c + 1; r < n; ++r) {
      const double f = m[r][c] / m[c][c];
      for (std::size_t k = c; k < n; ++k) m[r][k] -= f * m[c][k];
      b[r] -= f * b[c];
    }
  }
  Vector x(n);
  for (std::size_t c = n; c-- > 0;) {
    double v = b[c];
    for (std::size_t k = c + 1; k < n; ++k) v -= m[c][k] * x[k];
    x[c] = v / m[c][c];
  }
  return x;
}

// sgp's floor with a doubly stochastic schedule (w = 1, z = x): per coordinate k, one round is
// the affine map x <- A(t) (x - lr H (x - c_k)) (H = diag h_i, c_k = the peers' own optima); over
// a period x <- M x + m, whose fixed point x = (I - M)^-1 m is where sgp stalls (at whole
// periods). Returns mean_i ||x_i - theta*||^2 / ||theta*||^2 there, the simulator's
// optimum_error.
double sgp_floor(const topology::Schedule& s, const simulate::QuadraticProblem& f, std::size_t dim,
                 double lr) {
  const auto n = static_cast<std::size_t>(s.num_peers());
  double error = 0.0, norm = 0.0;
  for (std::size_t k = 0; k < dim; ++k) {
    // Columns of the period map: the images of the unit vectors; m: the image of 0.
    const auto round_map = [&](Vector x, std::int64_t t) {
      for (std::size_t i = 0; i < n; ++i)
        x[i] -= lr * f.curvature(static_cast<int>(i)) * (x[i] - f.own_optimum(int(i), k));
      return times(mixing(s, t), x);
    };
    const auto period_map = [&](Vector x) {
      for (int t = 0; t < s.period(); ++t) x = round_map(x, t);
      return x;
    };
    const Vector m = period_map(Vector(n, 0.0));
    Matrix i_minus_m(n, Vector(n, 0.0));
    for (std::size_t c = 0; c < n; ++c) {
      Vector unit(n, 0.0);
      unit[c] = 1.0;
      const Vector column = period_map(unit);
      for (std::size_t r = 0; r < n; ++r) i_minus_m[r][c] = (r == c) - (column[r] - m[r]);
    }
    const Vector x = solve(i_minus_m, m);
    const double theta = f.optimum()[k];
    for (double v : x) error += (v - theta) * (v - theta);
    norm += theta * theta;
  }
  return error / static_cast<double>(n) / norm;
}

// gt's rate per round with a doubly stochastic schedule: the errors (e_x, e_y) of x and of y
// (against its fixed point H (theta* - c)) follow the linear map
//   e_x' = A (e_x - lr e_y),  e_y' = A e_y + H (e_x' - e_x)
// whose period product J has eigenvalue 1 on the conserved sum(e_y) - sum(h_i e_x,i) (zero from
// y(0) = g(0) on); the rate is the spectral radius of J on the rest, found here by power
// iteration (renormalized, projected back onto that subspace each period), per round.
double gt_rate(const topology::Schedule& s, const simulate::QuadraticProblem& f, double lr) {
  const auto n = static_cast<std::size_t>(s.num_peers());
  Vector h(n);
  for (std::size_t i = 0; i < n; ++i) h[i] = f.curvature(static_cast<int>(i));
  const auto project = [&](Vector& ex, Vector& ey) {  // onto sum(e_y) = sum(h e_x), along y
    double c = 0.0;
    for (std::size_t i = 0; i < n; ++i) c += ey[i] - h[i] * ex[i];
    for (double& v : ey) v -= c / static_cast<double>(n);
  };
  Vector ex(n), ey(n);
  for (std::size_t i = 0; i < n; ++i) {
    ex[i] = std::sin(1.0 + static_cast<double>(i));
    ey[i] = std::cos(2.0 * static_cast<double>(i));
  }
  constexpr int kPeriods = 4000, kCounted = 2000;
  double log_growth = 0.0;
  for (int p = 0; p < kPeriods; ++p) {
    project(ex, ey);
    double before = 0.0;
    for (std::size_t i = 0; i < n; ++i) before += ex[i] * ex[i] + ey[i] * ey[i];
    for (int t = 0; t < s.period(); ++t) {
      const Matrix a = mixing(s, t);
      Vector step(n);
      for (std::size_t i = 0; i < n; ++i) step[i] = ex[i] - lr * ey[i];
      const Vector ex2 = times(a, step);
      Vector ey2 = times(a, ey);
      for (std::size_t i = 0; i < n; ++i) ey2[i] += h[i] * (ex2[i] - ex[i]);
      ex = ex2;
      ey = ey2;
    }
    double after = 0.0;
    for (std::size_t i = 0; i < n; ++i) after += ex[i] * ex[i] + ey[i] * ey[i];
    const double scale = 1.0 / std::sqrt(after);
    for (std::size_t i = 0; i < n; ++i) ex[i] *= scale, ey[i] *= scale;
    if (p >= kPeriods - kCounted) log_growth += 0.5 * std::log(after / before);
  }
  return std::exp(log_growth / kCounted / s.period());
}

// The measured per-round rate of the distance sqrt(optimum_error) between two logged rounds.
double measured_rate(const std::vector<simulate::RoundRecord>& r, std::size_t from,
                     std::size_t to) {
  const double d0 = std::sqrt(r[from].target_error), d1 = std::sqrt(r[to].target_error);
  return std::pow(d1 / d0, 1.0 / static_cast<double>(r[to].round - r[from].round));
}

struct ExactnessCase {
  const char* name;
  topology::Schedule schedule;
  double lr;
  std::int64_t rounds;
  std::int64_t rate_from, rate_to;  // rounds over which gt's decay is measured
};

void check_exactness(const ExactnessCase& c) {
  CAPTURE(c.name);
  auto o = quadratic(c.rounds, c.lr, 10.0);
  const simulate::QuadraticProblem f(o.seed, c.schedule.num_peers(), o.dim, o.spread);
  const auto sgp = records(c.schedule, o);
  o.optimizer.gradient_tracking = true;
  const auto gt = records(c.schedule, o);
  REQUIRE(gt.size() == static_cast<std::size_t>(c.rounds + 1));
  const double floor = sgp_floor(c.schedule, f, o.dim, c.lr);
  const double rate = gt_rate(c.schedule, f, c.lr);
  const auto from = static_cast<std::size_t>(c.rate_from), to = static_cast<std::size_t>(c.rate_to);
  const double measured = measured_rate(gt, from, to);
  std::printf(
      "%s, lr %g, %lld rounds: gt optimum error %.3e; sgp %.3e (theory's floor %.3e, ratio "
      "%.3f); gt rate per round %.6f over rounds %lld..%lld (theory %.6f, exponent ratio %.3f)\n",
      c.name, c.lr, static_cast<long long>(c.rounds), gt.back().target_error,
      sgp.back().target_error, floor, sgp.back().target_error / floor, measured,
      static_cast<long long>(c.rate_from), static_cast<long long>(c.rate_to), rate,
      std::log(measured) / std::log(rate));
  // float32 (as SGP's peers) resolves the distance itself to about 1e-7; agt's double does to
  // 1e-8 and below.
  o.mode = simulate::Mixing::async;
  const double agt = simulate::simulate(c.schedule, o).final_record.target_error;
  std::printf("%s: agt without faults (double): relative distance %.3e\n", c.name, std::sqrt(agt));
  CHECK(std::sqrt(agt) <= 1e-8);
  CHECK(gt.back().target_error <= 1e-8);
  CHECK(sgp.back().target_error >= 1e-4);
  CHECK(sgp.back().target_error == doctest::Approx(floor).epsilon(0.25));
  CHECK(std::log(measured) == doctest::Approx(std::log(rate)).epsilon(0.25));
}

}  // namespace

TEST_CASE("gt reaches the optimum where sgp stalls at theory's floor, at theory's rate") {
  using K = topology::TopologyKind;
  check_exactness(
      {"undirected ring of 16", generated(K::kBidirectionalRing, 16), 0.02, 1200, 100, 300});
  check_exactness({"directed ring of 8", generated(K::kRing, 8), 0.02, 1200, 100, 300});
  check_exactness(
      {"one-peer exponential, N = 12", generated(K::kOnePeerExponential, 12), 0.1, 1200, 20, 60});
}

TEST_CASE("agt under 5% loss, 1% duplication and reordering: running sums reach the optimum") {
  // Each message 0..2 rounds late: a total overtaken by a newer one on its edge arrives stale.
  auto o = quadratic(600, 0.02, 10.0);
  o.mode = simulate::Mixing::async;
  o.optimizer.gradient_tracking = true;
  o.faults = {0.05, 0.01, 2, 7};
  const auto ring = generated(topology::TopologyKind::kBidirectionalRing, 16);
  const auto with_sums = simulate::simulate(ring, o);
  o.running_sums = false;
  const auto without = simulate::simulate(ring, o);
  const auto& m = with_sums.messages;
  std::printf(
      "agt, undirected ring of 16, 600 rounds, %llu of %llu messages lost, %llu duplicated, "
      "%llu stale (overtaken or duplicate): optimum error %.3e with running sums; without: "
      "%.3e%s\n",
      static_cast<unsigned long long>(m.lost), static_cast<unsigned long long>(m.sent),
      static_cast<unsigned long long>(m.duplicated), static_cast<unsigned long long>(m.stale),
      with_sums.final_record.target_error, without.final_record.target_error,
      without.diverged_at ? " (diverged: not finite)" : "");
  CHECK(m.lost >= m.sent / 25);
  CHECK(m.stale - m.duplicated >= m.sent / 20);  // reordered, not counting the duplicates
  CHECK(with_sums.final_record.target_error <= 1e-6);
  CHECK_FALSE(without.final_record.target_error <= 1e-6);
}

namespace {

// One peer alone (no mixing): z_t - theta* = s_t (z_0 - theta*) in every coordinate, so
// optimum_error = s_t^2 for the scalar recurrence each rule gives with g = h s.
topology::Schedule alone() { return topology::Schedule(1, {{{}}}, {{1.0}}); }

// update(g, s, m): one round of the rule on the scalars, g = h s the gradient's factor.
void check_alone(const SimulationOptions& o,
                 const std::function<void(double g, double& s, double& m)>& update) {
  const auto r = records(alone(), o);
  REQUIRE(r.size() == static_cast<std::size_t>(o.rounds + 1));
  const double h = simulate::QuadraticProblem(o.seed, 1, o.dim, o.spread).curvature(0);
  double s = 1.0, m = 0.0;
  for (const auto& record : r) {
    CAPTURE(record.round);
    CHECK(record.target_error == doctest::Approx(s * s).epsilon(1e-4));
    update(h * s, s, m);
  }
}

}  // namespace

TEST_CASE("one peer: sgp and asgp are gradient descent, momentum its exact recurrence") {
  auto o = quadratic(60, 0.1, 1.0);
  const double lr = o.lr, beta = 0.8;
  for (auto mode : {simulate::Mixing::sync, simulate::Mixing::async}) {
    o.mode = mode;
    o.optimizer.momentum = 0.0;
    check_alone(o, [&](double g, double& s, double&) { s -= lr * g; });
    // Local (the peers' SGD): m <- beta m + g, step lr m.
    o.optimizer.momentum = beta;
    check_alone(o, [&](double g, double& s, double& m) {
      m = beta * m + g;
      s -= lr * m;
    });
    // Quasi-global alone: the step is lr (g + beta m) and the buffer takes (1 - beta) of that
    // move: m <- beta m + (1 - beta)(g + beta m), i.e. heavy ball with (1 - beta) g and the
    // buffer's own weight beta (2 - beta).
    o.optimizer.momentum_kind = simulate::MomentumKind::quasi_global;
    check_alone(o, [&](double g, double& s, double& m) {
      const double d = g + beta * m;
      s -= lr * d;
      m = beta * m + (1.0 - beta) * d;
    });
    o.optimizer.momentum_kind = simulate::MomentumKind::local;
  }
  // gt alone: y = m every round (the tracked heavy-ball buffer): the local heavy ball on g.
  o.mode = simulate::Mixing::sync;
  o.optimizer.gradient_tracking = true;
  check_alone(o, [&](double g, double& s, double& m) {
    m = beta * m + g;
    s -= lr * m;
  });
}

TEST_CASE("gt tracking local momentum keeps the optimum exact; sgp with momentum stalls") {
  // The peers' rule (docs/optimizers.md): m <- beta m + g, y tracks m, x <- x - lr y. m -> 0 at
  // the optimum, so y -> 0 and nothing pulls z away from it; sgp's momentum keeps its floor.
  auto o = quadratic(1200, 0.02, 10.0);
  o.optimizer.momentum = 0.5;
  const auto ring = generated(topology::TopologyKind::kRing, 8);
  const double sgp = simulate::simulate(ring, o).final_record.target_error;
  o.optimizer.gradient_tracking = true;
  const double gt = simulate::simulate(ring, o).final_record.target_error;
  std::printf("directed ring of 8, momentum 0.5, lr 0.02: gt optimum error %.3e, sgp %.3e\n", gt,
              sgp);
  CHECK(gt <= 1e-8);
  CHECK(sgp >= 1e-4);
}

TEST_CASE("gt: after every round the trackers sum to the current local (momentum) directions") {
  // Three peers, weights column- but not row-stochastic (w varies), noisy gradients; with
  // momentum y tracks m_i <- beta m_i + g_i (momentum tracking), without it g_i.
  const topology::Schedule s = three_peers_moving_weights();
  for (double beta : {0.0, 0.5}) {
    CAPTURE(beta);
    SimulationOptions o = tracking_options();
    o.optimizer.momentum = beta;
    const simulate::QuadraticProblem f(o.seed, 3, o.dim, o.spread);
    simulate::PeerPool pool(1);
    simulate::SyncPopulation population(s, 2 * o.dim, pool);
    simulate::PeerOptimizer<float> gt(o.optimizer, f, 3, o.dim, o.lr, o.noise, false);
    std::vector<float> z(2 * o.dim), scratch(o.dim);
    std::vector<double> m(3 * o.dim, 0.0);  // the expected buffers, in double
    const auto each = [&](const std::function<void(int)>& fn) {
      for (int r = 0; r < 3; ++r) {
        population.debias(r, z.data());
        fn(r);
      }
    };
    // The direction y took in is made of f_i's gradient at the peer's z now (noise of `round`).
    const auto expect_directions = [&](std::int64_t round) {
      for (std::size_t k = 0; k < o.dim; ++k) {
        double sum_y = 0.0, sum_u = 0.0, scale = 0.0;
        each([&](int r) {
          std::vector<float> g(z.begin(), z.begin() + static_cast<std::ptrdiff_t>(o.dim));
          f.gradient(r, round, o.noise, g.data());
          CHECK(gt.tracked_gradient(r)[k] == g[k]);
          double& u = m[static_cast<std::size_t>(r) * o.dim + k];
          u = beta * u + g[k];
          CHECK(gt.tracked_direction(r)[k] == doctest::Approx(u).epsilon(1e-5));
          sum_y += population.x(r)[o.dim + k];
          sum_u += u;
          scale += std::abs(u);
        });
        CHECK(sum_y == doctest::Approx(sum_u).epsilon(1e-5).scale(scale));
      }
    };
    each([&](int r) { gt.start(r, population.x(r), z); });
    expect_directions(0);
    for (std::int64_t round = 0; round < o.rounds; ++round) {
      each([&](int r) { gt.step(r, round, population.x(r), population.weights()[r], z, scratch); });
      population.mix(round);
      each([&](int r) { gt.after_mixing(r, round, population.x(r), z); });
      expect_directions(round + 1);
      double spread_of_w = 0.0;
      for (int r = 0; r < 3; ++r)
        spread_of_w = std::max(spread_of_w, std::abs(population.weights()[r] - 1.0));
      if (round > 0) CHECK(spread_of_w > 0.01);
    }
  }
}

TEST_CASE("agt: with every message delivered, the trackers sum to the local gradients") {
  // The same three peers, asynchronous (running sums, double): what a round pushes is applied
  // at the start of the next, and then sum_i y_i = sum_i g_i at the peers' z.
  const topology::Schedule s = three_peers_moving_weights();
  const SimulationOptions o = tracking_options();
  const simulate::QuadraticProblem f(o.seed, 3, o.dim, o.spread);
  simulate::PeerPool pool(1);
  simulate::AsyncPopulation population(s, 2 * o.dim, true, {}, pool);
  simulate::PeerOptimizer<double> agt(o.optimizer, f, 3, o.dim, o.lr, o.noise, true);
  std::vector<double> z(2 * o.dim), scratch(o.dim);
  const auto each = [&](const std::function<void(int)>& fn) {
    for (int r = 0; r < 3; ++r) {
      for (std::size_t k = 0; k < z.size(); ++k)
        z[k] = population.x(r)[k] / population.weights()[r];
      fn(r);
    }
  };
  each([&](int r) { agt.start(r, population.x(r), z); });
  for (std::int64_t round = 0; round < o.rounds; ++round) {
    population.deliver(round);
    if (round > 0) {
      each([&](int r) { agt.after_mixing(r, round - 1, population.x(r), z); });
      for (std::size_t k = 0; k < o.dim; ++k) {
        double sum_y = 0.0, sum_g = 0.0, scale = 0.0;
        each([&](int r) {
          std::vector<double> g(z.begin(), z.begin() + static_cast<std::ptrdiff_t>(o.dim));
          f.gradient(r, round, o.noise, g.data());
          sum_y += population.x(r)[o.dim + k];
          sum_g += g[k];
          scale += std::abs(g[k]);
        });
        CHECK(sum_y == doctest::Approx(sum_g).epsilon(1e-12).scale(scale));
      }
    }
    each([&](int r) { agt.step(r, round, population.x(r), population.weights()[r], z, scratch); });
    population.push(round);
  }
}

TEST_CASE("PGA: an exact round is the arithmetic mean of z; H = 1 is gradient descent on f") {
  const topology::Schedule s = three_peers_moving_weights();
  simulate::PeerPool pool(1);
  simulate::SyncPopulation population(s, 5, pool);
  for (int r = 0; r < 3; ++r)
    for (std::size_t k = 0; k < 5; ++k) population.x(r)[k] = static_cast<float>(r * 7 + k);
  population.mix(0);  // unequal w
  std::vector<double> mean(5, 0.0);
  std::vector<float> z(5);
  for (int r = 0; r < 3; ++r) {
    population.debias(r, z.data());
    for (std::size_t k = 0; k < 5; ++k) mean[k] += z[k] / 3.0;
  }
  const std::vector<bool> live(3, true);
  population.restart_at(live, population.mean_z(live));
  for (int r = 0; r < 3; ++r) {
    CHECK(population.weights()[r] == 1.0);
    for (std::size_t k = 0; k < 5; ++k) CHECK(population.x(r)[k] == static_cast<float>(mean[k]));
  }
  // Every round exact: all peers at the same z step to z - lr mean_i h_i (z - c_i), which is
  // z - lr hbar (z - theta*): gradient descent on f, optimum_error = (1 - lr hbar)^(2t).
  const auto ring = generated(topology::TopologyKind::kBidirectionalRing, 8);
  auto o = quadratic(40, 0.1, 10.0);
  o.optimizer.global_average_every = 1;
  const double hbar = simulate::QuadraticProblem(o.seed, 8, o.dim, o.spread).mean_curvature();
  for (const auto& r : records(ring, o)) {
    CAPTURE(r.round);
    CHECK(r.target_error ==
          doctest::Approx(std::pow(1.0 - o.lr * hbar, 2.0 * r.round)).epsilon(1e-4));
    CHECK(r.consensus_error == 0.0);
  }
}

TEST_CASE("slow momentum: beta_s = 0 is PGA; with H = 1 it is heavy ball on f") {
  const auto ring = generated(topology::TopologyKind::kBidirectionalRing, 8);
  auto o = quadratic(80, 0.05, 10.0);
  o.optimizer.global_average_every = 4;
  const auto pga = records(ring, o);
  o.optimizer.slow_momentum = 0.0;
  const auto slow0 = records(ring, o);
  REQUIRE(pga.size() == slow0.size());
  for (std::size_t i = 0; i < pga.size(); ++i) {
    CAPTURE(i);
    CHECK(slow0[i].target_error == doctest::Approx(pga[i].target_error).epsilon(1e-5));
  }
  // H = 1: u <- beta_s u + (z_prev - z_avg) / lr = beta_s u + hbar s, s <- s - lr u.
  o.optimizer.global_average_every = 1;
  o.optimizer.slow_momentum = 0.7;
  const double hbar = simulate::QuadraticProblem(o.seed, 8, o.dim, o.spread).mean_curvature();
  double s = 1.0, u = 0.0;
  for (const auto& r : records(ring, o)) {
    CAPTURE(r.round);
    CHECK(r.target_error == doctest::Approx(s * s).epsilon(1e-4));
    u = 0.7 * u + hbar * s;
    s -= o.lr * u;
  }
}

TEST_CASE("H = 0, or larger than the run, is plain gossip, bit for bit") {
  const auto ring = generated(topology::TopologyKind::kBidirectionalRing, 8);
  auto o = quadratic(30, 0.05, 10.0);
  const auto plain = records(ring, o);
  o.optimizer.global_average_every = 31;
  const auto never = records(ring, o);
  REQUIRE(plain.size() == never.size());
  for (std::size_t i = 0; i < plain.size(); ++i) {
    CHECK(plain[i].target_error == never[i].target_error);
    CHECK(plain[i].consensus_error == never[i].consensus_error);
  }
}
