#include "sgp/data/sharding.hpp"

#include <random>
#include <utility>

#include "sgp/error.hpp"

namespace sgp::data {

void seeded_shuffle(std::vector<std::size_t>& indices, std::uint64_t seed) {
  // Fisher-Yates with mt19937_64 (fully specified by the standard) and a rejection-free
  // multiply-shift range reduction; the bias for n << 2^64 is negligible.
  std::mt19937_64 rng(seed);
  for (std::size_t i = indices.size(); i > 1; --i) {
    const auto j = static_cast<std::size_t>((static_cast<unsigned __int128>(rng()) * i) >> 64);
    std::swap(indices[i - 1], indices[j]);
  }
}

std::vector<std::vector<std::size_t>> make_shards(std::size_t n, int num_shards,
                                                  std::uint64_t seed) {
  SGP_ENFORCE(num_shards >= 1, "need at least one shard, got {}", num_shards);
  SGP_ENFORCE(static_cast<std::size_t>(num_shards) <= n, "{} shards of {} samples", num_shards, n);
  std::vector<std::size_t> all(n);
  for (std::size_t i = 0; i < n; ++i) all[i] = i;
  seeded_shuffle(all, seed);
  std::vector<std::vector<std::size_t>> shards(num_shards);
  const std::size_t base = n / num_shards, extra = n % num_shards;
  std::size_t begin = 0;
  for (int s = 0; s < num_shards; ++s) {
    const std::size_t size = base + (static_cast<std::size_t>(s) < extra ? 1 : 0);
    shards[s].assign(all.begin() + begin, all.begin() + begin + size);
    begin += size;
  }
  return shards;
}

BatchSampler::BatchSampler(std::vector<std::size_t> shard, int batch_size, std::uint64_t seed)
    : shard_(std::move(shard)), batch_size_(batch_size), seed_(seed) {
  SGP_ENFORCE(batch_size >= 1, "batch size must be >= 1, got {}", batch_size);
  SGP_ENFORCE(!shard_.empty(), "a shard must not be empty");
  reshuffle();
}

void BatchSampler::reshuffle() {
  order_ = shard_;
  // Mix the epoch into the seed so that each epoch has its own order.
  seeded_shuffle(order_, seed_ * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(epoch_) + 1);
}

const std::vector<std::size_t>& BatchSampler::next() {
  if (position_ >= order_.size()) {
    ++epoch_;
    position_ = 0;
    reshuffle();
  }
  const std::size_t end = std::min(order_.size(), position_ + batch_size_);
  batch_.assign(order_.begin() + position_, order_.begin() + end);
  position_ = end;
  return batch_;
}

void BatchSampler::seek(int epoch, std::size_t position) {
  SGP_ENFORCE(epoch >= 0 && position <= shard_.size(), "cannot seek to epoch {} position {}", epoch,
              position);
  epoch_ = epoch;
  position_ = position;
  reshuffle();
}

std::size_t BatchSampler::batches_per_epoch() const {
  return (shard_.size() + batch_size_ - 1) / batch_size_;
}

}  // namespace sgp::data
