#pragma once
// How the training set is split across peers (--partition), seeded and the same on every
// platform:
//
//   iid          a seeded shuffle cut into N pieces whose sizes differ by at most one
//                (make_shards: the split of every run before partitions existed).
//   dirichlet:A  label skew by a Dirichlet distribution (Hsu et al. 2019, as in decentralizepy
//                and most papers since D-PSGD): for every class, proportions p ~ Dir(A, ..., A)
//                over the N peers, and the class's (shuffled) samples are cut by those
//                proportions. Small A: each class lives on few peers; A -> infinity: IID. Peers'
//                shards differ in size; the draw is repeated (same generator, next values) until
//                every peer has at least kMinPartitionSamples samples.
//   shards:K     pathological label skew (McMahan et al. 2017): the samples sorted by label are
//                cut into N * K equal shards, and each peer gets K of them at random. Each shard
//                spans at most two labels (when a class holds at least one shard), so a peer
//                sees at most 2 K labels.
//
// Iterations per epoch do not depend on the partition: every peer runs
// ceil(samples / (N * batch)) per epoch (synchronous gossip rounds must line up), cycling
// through its own shard, reshuffled at each pass. An "epoch" is one pass over the whole data set
// by all peers together; a peer with a small shard passes over it several times, a peer with a
// large one less than once.
//
// Randomness: SeededRandom (seeded_random.hpp), written here rather than taken from <random>'s
// distributions, whose output differs between standard libraries.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sgp/data/seeded_random.hpp"

namespace sgp::data {

inline constexpr std::size_t kMinPartitionSamples = 10;

struct PartitionSpec {
  enum class Kind { iid, dirichlet, shards };
  Kind kind = Kind::iid;
  double alpha = 0.0;       // dirichlet
  int shards_per_peer = 0;  // shards
};

// Parses "iid", "dirichlet:ALPHA" (ALPHA > 0) or "shards:K" (K >= 1); InputError
// "'TEXT' is not a partition: WHY" (the caller adds where).
PartitionSpec parse_partition_spec(std::string_view text);

// Splits samples with these labels (each in 0..num_classes-1) across num_peers peers: disjoint
// index lists that together cover every sample. InputError when it cannot (fewer samples than
// peers or than N * K shards, Dirichlet draws that keep leaving a peer nearly empty).
std::vector<std::vector<std::size_t>> make_partition(const std::vector<std::int32_t>& labels,
                                                     int num_classes, int num_peers,
                                                     const PartitionSpec& spec, std::uint64_t seed);

// counts[c] = the number of samples of class c in `indices`.
std::vector<std::int64_t> label_histogram(const std::vector<std::int32_t>& labels, int num_classes,
                                          const std::vector<std::size_t>& indices);

// A Dir(alpha, ..., alpha) sample of `size` proportions (exposed for tests).
std::vector<double> dirichlet(SeededRandom& random, double alpha, int size);

}  // namespace sgp::data
