#include "sgp/gossip/consensus_vectors.hpp"

#include "sgp/data/seeded_random.hpp"

namespace sgp::gossip {
namespace {

using data::splitmix64;

// m[d]: an integer in [-100, 100]; every peer's own vector is m plus an integer deviation in
// [-15, 15], and the last rank's deviation is minus the sum of the others', so the mean is m.
double exact_mean(std::uint64_t seed, std::size_t d) {
  return static_cast<double>(splitmix64(seed * 0x100000001b3ull + d) % 201) - 100.0;
}
double deviation(std::uint64_t seed, int rank, std::size_t d) {
  return static_cast<double>(splitmix64(splitmix64(seed + 0x51ed27ull * (rank + 1)) + d) % 31) -
         15.0;
}
}  // namespace

std::vector<float> consensus_initial_vector(std::uint64_t seed, int rank, int num_peers,
                                            std::size_t dim) {
  std::vector<float> x(dim);
  for (std::size_t d = 0; d < dim; ++d) {
    double v = exact_mean(seed, d);
    if (rank < num_peers - 1) {
      v += deviation(seed, rank, d);
    } else {
      for (int r = 0; r < num_peers - 1; ++r) v -= deviation(seed, r, d);
    }
    x[d] = static_cast<float>(v);
  }
  return x;
}

std::vector<float> consensus_mean_vector(std::uint64_t seed, std::size_t dim) {
  std::vector<float> mean(dim);
  for (std::size_t d = 0; d < dim; ++d) mean[d] = static_cast<float>(exact_mean(seed, d));
  return mean;
}

}  // namespace sgp::gossip
