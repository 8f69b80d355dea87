#pragma once
// The vectors of a consensus run (sgp consensus, sgp simulate): every peer starts from the
// same seeded vectors, whose mean is known exactly, so the consensus error can be measured.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace sgp::gossip {

// Peer `rank`'s initial vector: the exact mean plus a deviation; the deviations sum to zero.
std::vector<float> consensus_initial_vector(std::uint64_t seed, int rank, int num_peers,
                                            std::size_t dim);
// The mean of every peer's initial vector (exact: integers in [-100, 100]).
std::vector<float> consensus_mean_vector(std::uint64_t seed, std::size_t dim);

}  // namespace sgp::gossip
