#include <cmath>
#include <complex>
#include <numbers>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "sgp/gossip/push_sum_config.hpp"
#include "sgp/gossip/wire_format.hpp"
#include "sgp/topology/analysis.hpp"
#include "sgp/topology/dot_file.hpp"
#include "sgp/topology/generator.hpp"
#include "sgp/topology/iterative_rate.hpp"
#include "support/topology_test_util.hpp"

using namespace sgp::topology;

namespace {

Schedule make(TopologyKind kind, int n, std::optional<double> self_weight = std::nullopt,
              int degree = 0) {
  GeneratorOptions options;
  options.num_peers = n;
  options.self_weight = self_weight;
  options.degree = degree;
  return generate_topology(kind, options);
}

}  // namespace

TEST_CASE("matrix: singular values of known matrices") {
  Matrix d(3);  // a permuted diagonal: singular values are the absolute entries
  d(0, 1) = 3.0;
  d(1, 2) = -2.0;
  d(2, 0) = 1.0;
  const auto sd = d.singular_values();
  CHECK(sd[0] == doctest::Approx(3.0).epsilon(1e-14));
  CHECK(sd[1] == doctest::Approx(2.0).epsilon(1e-14));
  CHECK(sd[2] == doctest::Approx(1.0).epsilon(1e-14));
  Matrix shear(2);  // [[1, 1], [0, 1]]: golden ratio and its inverse
  shear(0, 0) = shear(0, 1) = shear(1, 1) = 1.0;
  const double phi = (1.0 + std::sqrt(5.0)) / 2.0;
  const auto ss = shear.singular_values();
  CHECK(ss[0] == doctest::Approx(phi).epsilon(1e-14));
  CHECK(ss[1] == doctest::Approx(1.0 / phi).epsilon(1e-14));
  // Spectral radius of the shear is 1 although its norm is phi; a nilpotent matrix has 0.
  CHECK(shear.spectral_radius() == doctest::Approx(1.0).epsilon(1e-9));
  Matrix nilpotent(3);
  nilpotent(0, 1) = 5.0;
  nilpotent(1, 2) = 7.0;
  CHECK(nilpotent.spectral_radius() == 0.0);
  CHECK(Matrix(4).singular_values() == std::vector<double>(4, 0.0));
}

TEST_CASE("mixing matrices are column-stochastic and multiply in round order") {
  const Schedule s = make(TopologyKind::kOnePeerExponential, 6, 0.25);
  for (int p = 0; p < s.period(); ++p) {
    const Matrix m = mixing_matrix(s, p);
    for (int col = 0; col < 6; ++col) {
      double sum = 0.0;
      for (int row = 0; row < 6; ++row) sum += m(row, col);
      CHECK(sum == doctest::Approx(1.0).epsilon(1e-14));
    }
  }
  const Matrix a = period_product(s);
  const auto expected = sgp::testing::naive_period_product(s);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) CHECK(a(i, j) == doctest::Approx(expected[i][j]).epsilon(1e-14));
}

TEST_CASE("closed form: complete graph with uniform weights reaches consensus in one round") {
  for (int n : {2, 5, 16}) {
    const TopologyReport r = analyze_topology(make(TopologyKind::kComplete, n), 10);
    CHECK(*r.consensus_rate < 1e-12);
    CHECK(*r.asymptotic_rate < 1e-12);
    CHECK(r.predicted_rounds == 1);
    CHECK(r.diameter == 1);
  }
}

TEST_CASE("closed form: directed ring with self weight 1/2 has rate |1/2 + 1/2 e^(2 pi i/N)|") {
  for (int n : {3, 4, 5, 8, 16}) {
    const TopologyReport r = analyze_topology(make(TopologyKind::kRing, n, 0.5), 10);
    const double expected =
        std::abs(0.5 + 0.5 * std::exp(std::complex<double>(0.0, 2.0 * std::numbers::pi / n)));
    CHECK(*r.consensus_rate == doctest::Approx(expected).epsilon(1e-12));
    // The ring's matrix is normal (circulant): the asymptotic rate is the same.
    CHECK(*r.asymptotic_rate == doctest::Approx(expected).epsilon(1e-9));
    const auto rounds = static_cast<std::int64_t>(std::ceil(std::log(1e-6) / std::log(expected)));
    CHECK(r.predicted_rounds == rounds);
    CHECK(r.diameter == n - 1);
  }
}

TEST_CASE("closed form: one-peer exponential, N = 2^d, self weight 1/2, averages in d rounds") {
  for (int d : {1, 2, 3, 4}) {
    const int n = 1 << d;
    const Schedule s = make(TopologyKind::kOnePeerExponential, n, 0.5);
    REQUIRE(s.period() == d);
    const Matrix a = period_product(s);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) CHECK(a(i, j) == doctest::Approx(1.0 / n).epsilon(1e-15));
    const TopologyReport r = analyze_topology(s, 10);
    CHECK(*r.consensus_rate < 1e-12);
    CHECK(r.predicted_rounds == d);
  }
  // Not a power of two: no exact average after one period.
  CHECK(*analyze_topology(make(TopologyKind::kOnePeerExponential, 6, 0.5), 10).consensus_rate >
        0.01);
}

TEST_CASE("circulant topologies: sigma = rho = max over k != 0 of |sum_s c_s e^(2 pi i s k/N)|") {
  // A static circulant matrix is normal: its singular values are the moduli of its eigenvalues
  // lambda_k = sum_s c_s w^(sk), with c_s the weight rank 0 gives rank s (c_0 its self weight).
  for (TopologyKind kind : {TopologyKind::kRing, TopologyKind::kBidirectionalRing,
                            TopologyKind::kExponential, TopologyKind::kComplete}) {
    for (int n : {5, 8, 12}) {
      for (std::optional<double> a : {std::optional<double>(), std::optional<double>(0.3)}) {
        const Schedule s = make(kind, n, a);
        std::vector<double> c(n, 0.0);
        c[0] = s.self_weight(0, 0);
        for (const Push& push : s.out_edges(0, 0)) c[push.peer] = push.weight;
        double expected = 0.0;
        for (int k = 1; k < n; ++k) {
          std::complex<double> lambda = 0.0;
          for (int shift = 0; shift < n; ++shift)
            lambda += c[shift] * std::polar(1.0, 2.0 * std::numbers::pi * shift * k / n);
          expected = std::max(expected, std::abs(lambda));
        }
        const TopologyReport r = analyze_topology(s, 1);
        CAPTURE(topology_kind_name(kind));
        CAPTURE(n);
        CHECK(*r.consensus_rate == doctest::Approx(expected).epsilon(1e-12));
        CHECK(*r.asymptotic_rate == doctest::Approx(expected).epsilon(1e-9));
      }
    }
  }
}

TEST_CASE("above kMaxSpectralPeers the rates are skipped, the rest is still reported") {
  const TopologyReport r = analyze_topology(make(TopologyKind::kRing, kMaxSpectralPeers + 1), 1);
  CHECK_FALSE(r.consensus_rate.has_value());
  CHECK_FALSE(r.predicted_rounds.has_value());
  CHECK(r.diameter == kMaxSpectralPeers);
  CHECK(format_report(r).find("consensus rate: not computed") != std::string::npos);
}

TEST_CASE("asymptotic rate: two peers, A = [[a, 1-b], [1-a, b]] has eigenvalues 1, a + b - 1") {
  const Schedule s(2, {{{{1, 0.1}}, {{0, 0.7}}}}, {{0.9, 0.3}});
  const TopologyReport r = analyze_topology(s, 10);
  CHECK(*r.asymptotic_rate == doctest::Approx(0.2).epsilon(1e-9));
  CHECK(*r.consensus_rate >= *r.asymptotic_rate);
  CHECK(*r.consensus_rate == doctest::Approx(sgp::testing::power_iteration_rate(s)).epsilon(1e-9));
}

TEST_CASE("describe agrees with an independent computation (power iteration, plain BFS)") {
  std::vector<Schedule> cases = {
      make(TopologyKind::kStar, 7),
      make(TopologyKind::kRandomRegular, 12, std::nullopt, 3),
      make(TopologyKind::kTorus, 12),
      make(TopologyKind::kExponential, 10),
      make(TopologyKind::kOnePeerExponential, 6),
      make(TopologyKind::kOnePeerExponential, 12, 0.3),
      make(TopologyKind::kHypercube, 16, 0.6),
      make(TopologyKind::kBidirectionalRing, 9),
  };
  for (const Schedule& s : cases) {
    const TopologyReport r = analyze_topology(s, 1000);
    CHECK(*r.consensus_rate ==
          doctest::Approx(sgp::testing::power_iteration_rate(s)).epsilon(1e-9));
    CHECK(r.diameter == sgp::testing::naive_diameter(s));
    CHECK(*r.asymptotic_rate <= *r.consensus_rate + 1e-12);
    CHECK(r.strong_components == 1);
    if (*r.consensus_rate < 1.0 && *r.consensus_rate > 0.0) {
      // One period fewer than predicted does not guarantee the tolerance; the prediction does.
      const auto periods = *r.predicted_rounds / r.period;
      CHECK(std::pow(*r.consensus_rate, periods) <= 1e-6);
      CHECK(std::pow(*r.consensus_rate, periods - 1) > 1e-6);
    }
  }
}

TEST_CASE("the period product takes the phases in time order, also when they do not commute") {
  // Phase 0: 0 pushes half to 1; phase 1: 1 pushes half to 2. A = M_1 M_0 moves half of 0's
  // mass to 1 and then half of that on to 2; M_0 M_1 would leave 2 nothing of it.
  const Schedule three = sgp::topology::parse_dot(R"(digraph {
    period = 2;
    0 -> 1 [weight=0.5, phase=0];
    1 -> 2 [weight=0.5, phase=1];
  })",
                                                  "<three>");
  const auto a = sgp::topology::period_product(three);
  CHECK(a(0, 0) == 0.5);
  CHECK(a(1, 0) == 0.25);
  CHECK(a(2, 0) == 0.25);
  CHECK(a(1, 1) == 0.5);
  CHECK(a(2, 1) == 0.5);
  // Weights that differ by rank, period 2: the phases do not commute, and the rate must still
  // be that of the product in time order.
  const Schedule moving = sgp::topology::parse_dot(R"(digraph {
    period = 2;
    0 -> 1 [weight=0.3, phase=0]; 1 -> 2 [weight=0.5, phase=0];
    2 -> 3 [weight=0.6, phase=0]; 3 -> 0 [weight=0.4, phase=0];
    0 -> 2 [weight=0.3, phase=1]; 1 -> 3 [weight=0.5, phase=1];
    2 -> 0 [weight=0.6, phase=1]; 3 -> 1 [weight=0.4, phase=1];
  })",
                                                   "<moving>");
  const TopologyReport r = analyze_topology(moving, 1000);
  CHECK(*r.consensus_rate ==
        doctest::Approx(sgp::testing::power_iteration_rate(moving)).epsilon(1e-9));
}

TEST_CASE("degrees, bytes per round and connectivity") {
  const TopologyReport star = analyze_topology(make(TopologyKind::kStar, 5), 1000);
  CHECK(star.out_degree[0].max == 4);
  CHECK(star.out_degree[0].min == 1);
  CHECK(star.in_degree[0].max == 4);
  CHECK(star.max_bytes_per_round == 4 * message_bytes(1000));
  CHECK(message_bytes(1000) == 4080);
  CHECK(kMessageHeaderBytes == static_cast<std::int64_t>(sgp::gossip::kHeaderBytes));
  for (std::int64_t p : {1, 1000, 262144, 262145, 669706, 37500000, 100000000}) {
    CAPTURE(p);
    const sgp::gossip::Chunking chunking(p, sgp::gossip::PushSumConfig{}.chunk_elements);
    CHECK(message_chunks(p) == chunking.chunks());
  }
  CHECK(message_bytes(669706) == 4 * 669706 + 3 * 80);
  // 4 + 1 + 1 + 1 + 1 messages over 5 peers.
  CHECK(star.mean_bytes_per_round == doctest::Approx(8.0 / 5.0 * 4080));

  const TopologyReport ope = analyze_topology(make(TopologyKind::kOnePeerExponential, 8), 1);
  CHECK(ope.period == 3);
  CHECK(ope.out_degree.size() == 3);
  CHECK(ope.union_out_degree.min == 3);
  CHECK(ope.mean_bytes_per_round == doctest::Approx(84.0));
  CHECK(ope.diameter == 3);  // 7 = 1 + 2 + 4

  // A one-way star (hub -> leaves only) cannot reach consensus: every peer is its own component.
  std::vector<std::vector<std::vector<Push>>> edges(1, std::vector<std::vector<Push>>(4));
  for (int leaf = 1; leaf < 4; ++leaf) edges[0][0].push_back({leaf, 0.25});
  const Schedule one_way(4, edges, {{0.25, 1.0, 1.0, 1.0}});
  CHECK(union_strong_components(one_way) == 4);
  CHECK(union_components(one_way) == std::vector<std::vector<int>>{{0}, {1}, {2}, {3}});
  CHECK(union_components(make(TopologyKind::kStar, 3)) == std::vector<std::vector<int>>{{0, 1, 2}});
  CHECK_FALSE(union_diameter(one_way).has_value());
  const TopologyReport r = analyze_topology(one_way, 1);
  CHECK(format_report(r).find("NO (4 strongly connected components") != std::string::npos);
  CHECK(format_report(r).find("infinite") != std::string::npos);
}

TEST_CASE("the report states the formula and the figures") {
  const TopologyReport r = analyze_topology(make(TopologyKind::kRing, 8, 0.5), 100);
  const std::string text = format_report(r);
  CHECK(text.find("peers: 8") != std::string::npos);
  CHECK(text.find("||A (I - 11^T/N)||_2") != std::string::npos);
  CHECK(text.find(fmt::format("{:.6g}", std::cos(std::numbers::pi / 8))) != std::string::npos);
  CHECK(text.find(fmt::format(": {} (", *r.predicted_rounds)) != std::string::npos);
}

// Issue 39, item 7: sigma without the dense product, so that 1,024 peers cost what simulating
// them does. The iterative sigma is the dense one on schedules of every kind (static, several
// phases, exact), and the closed form of the slowest case, the directed ring of 1,024.
TEST_CASE("iterative sigma (Lanczos on vectors) is the dense sigma, and cos(pi/N) for a ring") {
  for (TopologyKind kind : {TopologyKind::kRing, TopologyKind::kTorus, TopologyKind::kExponential,
                            TopologyKind::kOnePeerExponential, TopologyKind::kComplete}) {
    for (int n : {12, 48}) {
      const Schedule s = make(kind, n, 0.4);
      CAPTURE(topology_kind_name(kind));
      CAPTURE(n);
      const auto iterative = iterative_consensus_rate(s);
      CHECK(iterative.sigma ==
            doctest::Approx(*analyze_topology(s, 1).consensus_rate).epsilon(1e-10));
      // A x and A^T x are the dense product's.
      const Matrix a = period_product(s);
      std::vector<double> x(n);
      for (int i = 0; i < n; ++i) x[i] = std::sin(1.0 + i);
      const auto y = apply_period(s, x), yt = apply_period_transposed(s, x);
      for (int i = 0; i < n; ++i) {
        double row = 0.0, column = 0.0;
        for (int j = 0; j < n; ++j) {
          row += a(i, j) * x[j];
          column += a(j, i) * x[j];
        }
        CHECK(y[i] == doctest::Approx(row).epsilon(1e-12));
        CHECK(yt[i] == doctest::Approx(column).epsilon(1e-12));
      }
    }
  }
  const int n = kMaxSpectralPeers;
  const TopologyReport ring = analyze_topology(make(TopologyKind::kRing, n), 1);
  const double closed_form = std::cos(std::numbers::pi / n);
  CHECK(std::abs(*ring.consensus_rate - closed_form) < 1e-12);
  CHECK(ring.predicted_rounds ==
        static_cast<std::int64_t>(std::ceil(std::log(1e-6) / std::log(closed_form))));
  CHECK_FALSE(ring.asymptotic_rate);  // not computed without the dense product
  CHECK(iterative_consensus_rate(make(TopologyKind::kRing, n)).iterations < n);
  // An exact schedule of 512 peers: sigma 0, and the exact average is recognised.
  const TopologyReport exact = analyze_topology(make(TopologyKind::kOnePeerExponential, 512), 1);
  CHECK(*exact.consensus_rate < 1e-12);
  CHECK(exact.exact_after_rounds == 9);
  CHECK(exact_average_rounds(make(TopologyKind::kOnePeerExponential, 512)) == 9);
}
