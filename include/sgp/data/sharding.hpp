#pragma once
// Splitting a data set across peers and drawing mini-batches from a shard.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace sgp::data {

// Reproducible on every platform (std::shuffle's algorithm is implementation-defined).
void seeded_shuffle(std::vector<std::size_t>& indices, std::uint64_t seed);

// Shuffles 0..n-1 once with `seed`, then cuts it into `num_shards` disjoint contiguous pieces
// whose sizes differ by at most one.
std::vector<std::vector<std::size_t>> make_shards(std::size_t n, int num_shards,
                                                  std::uint64_t seed);

// Mini-batches over one shard: each epoch visits every sample of the shard exactly once, in an
// order reshuffled per epoch from (seed, epoch). The last batch of an epoch may be short.
class BatchSampler {
 public:
  BatchSampler(std::vector<std::size_t> shard, int batch_size, std::uint64_t seed);

  // Indices of the next batch; moves to the next epoch when the current one is exhausted.
  const std::vector<std::size_t>& next();
  int epoch() const { return epoch_; }
  // Position inside the epoch, so that a checkpoint can resume exactly.
  std::size_t position() const { return position_; }
  void seek(int epoch, std::size_t position);
  std::size_t batches_per_epoch() const;
  const std::vector<std::size_t>& shard() const { return shard_; }

 private:
  void reshuffle();

  std::vector<std::size_t> shard_;
  std::vector<std::size_t> order_;
  std::vector<std::size_t> batch_;
  int batch_size_;
  std::uint64_t seed_;
  int epoch_ = 0;
  std::size_t position_ = 0;
};

}  // namespace sgp::data
