// Compressed gossip in sgp simulate (compressed_population.hpp): sum_i x_i and sum_i w_i are
// conserved every round whatever the compressor; the peers reach the exact mean with top-1% and
// sign on a one-peer exponential graph (N = 64) and a directed ring (N = 16); bytes are counted
// from the payloads; flags that do not go together are refused.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "sgp/compress/compressor.hpp"
#include "sgp/simulate/compressed_population.hpp"
#include "sgp/simulate/simulation.hpp"
#include "sgp/topology/generator.hpp"

using namespace sgp;

namespace {

topology::Schedule generated(topology::TopologyKind kind, int n) {
  topology::GeneratorOptions g;
  g.num_peers = n;
  return topology::generate_topology(kind, g);
}

compress::Compressor compressor(const char* spec) {
  return compress::parse_compressor(spec, "--compress");
}

// The first logged round whose mean error is at most `bound`, or -1.
struct Reached {
  std::int64_t round = -1;
  simulate::SimulationResult result;
};
Reached rounds_to(const topology::Schedule& s, simulate::SimulationOptions o, double bound) {
  Reached reached;
  reached.result = simulate::simulate(s, o, [&](const simulate::RoundRecord& r) {
    if (reached.round < 0 && r.target_error <= bound) reached.round = r.round;
  });
  return reached;
}

}  // namespace

TEST_CASE("compressed push-sum conserves sum x and sum w every round") {
  constexpr std::size_t kDim = 120;
  simulate::PeerPool pool(2);
  for (auto kind : {topology::TopologyKind::kRing, topology::TopologyKind::kOnePeerExponential}) {
    const auto schedule = generated(kind, 8);
    for (const char* spec : {"topk:0.05", "randk:0.1", "sign", "qsgd:4"}) {
      CAPTURE(std::string(spec));
      simulate::CompressedPopulation population(schedule, kDim, compressor(spec), 0.3, 7, pool);
      std::vector<double> sum(kDim, 0.0);
      for (int r = 0; r < 8; ++r) {
        for (std::size_t k = 0; k < kDim; ++k) {
          population.x(r)[k] = std::sin(static_cast<double>(r * 131 + k)) * (r + 1) * 10;
          sum[k] += population.x(r)[k];
        }
      }
      std::vector<double> largest(kDim, 0.0);
      for (std::int64_t round = 0; round < 60; ++round) {
        REQUIRE(population.mix(round) > 0);
        double sum_w = 0.0;
        for (double w : population.weights()) sum_w += w;
        REQUIRE(sum_w == doctest::Approx(8.0).epsilon(1e-14));
        // Double rounding of the terms that moved: each round adds a few ulps of them.
        for (std::size_t k = 0; k < kDim; ++k) {
          double s = 0.0, magnitude = 0.0;
          for (int r = 0; r < 8; ++r) {
            s += population.x(r)[k];
            magnitude += std::fabs(population.x(r)[k]) + std::fabs(population.public_copy(r)[k]);
          }
          largest[k] = std::max(largest[k], magnitude);
          REQUIRE(std::fabs(s - sum[k]) <= 1e-14 * static_cast<double>(round + 1) * largest[k]);
        }
      }
    }
  }
}
