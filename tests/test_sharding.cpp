#include <algorithm>
#include <set>
#include <vector>

#include <doctest/doctest.h>

#include "sgp/data/sharding.hpp"

using sgp::data::BatchSampler;
using sgp::data::make_shards;

TEST_CASE("shards are disjoint, cover the set and differ in size by at most one") {
  for (int n_shards : {1, 3, 4, 7}) {
    const std::size_t n = 1003;
    const auto shards = make_shards(n, n_shards, 0);
    REQUIRE(shards.size() == static_cast<std::size_t>(n_shards));
    std::set<std::size_t> seen;
    std::size_t smallest = n, largest = 0;
    for (const auto& shard : shards) {
      smallest = std::min(smallest, shard.size());
      largest = std::max(largest, shard.size());
      for (auto i : shard) CHECK(seen.insert(i).second);
    }
    CHECK(seen.size() == n);
    CHECK(*seen.rbegin() == n - 1);
    CHECK(largest - smallest <= 1);
  }
}

TEST_CASE("shards are reproducible from the seed and shuffled") {
  CHECK(make_shards(500, 4, 0) == make_shards(500, 4, 0));
  CHECK(make_shards(500, 4, 0) != make_shards(500, 4, 1));
  const auto one = make_shards(500, 1, 0)[0];
  CHECK(!std::is_sorted(one.begin(), one.end()));
}

TEST_CASE("the batches of one epoch visit every sample of the shard once") {
  std::vector<std::size_t> shard = {5, 9, 12, 40, 41, 42, 77, 78, 100, 3, 8};
  BatchSampler sampler(shard, 4, 7);
  CHECK(sampler.batches_per_epoch() == 3);
  std::multiset<std::size_t> visited;
  std::vector<std::size_t> sizes;
  for (int b = 0; b < 3; ++b) {
    const auto& batch = sampler.next();
    sizes.push_back(batch.size());
    visited.insert(batch.begin(), batch.end());
    CHECK(sampler.epoch() == 0);
  }
  CHECK(sizes == std::vector<std::size_t>{4, 4, 3});
  CHECK(visited == std::multiset<std::size_t>(shard.begin(), shard.end()));
  // The next epoch starts with its own order and again covers the shard.
  std::vector<std::size_t> second;
  for (int b = 0; b < 3; ++b) {
    const auto& batch = sampler.next();
    CHECK(sampler.epoch() == 1);
    second.insert(second.end(), batch.begin(), batch.end());
  }
  CHECK(std::multiset<std::size_t>(second.begin(), second.end()) == visited);
}

TEST_CASE("seek resumes a sampler exactly where another one stood") {
  std::vector<std::size_t> shard(50);
  for (std::size_t i = 0; i < shard.size(); ++i) shard[i] = i * 3;
  BatchSampler a(shard, 8, 11);
  for (int i = 0; i < 9; ++i) a.next();
  BatchSampler b(shard, 8, 11);
  b.seek(a.epoch(), a.position());
  for (int i = 0; i < 10; ++i) CHECK(a.next() == b.next());
}
