// Partitions of a labelled set across peers: disjoint, covering, seeded, and as label-skewed as
// specified; the generator behind them; the messages for bad --partition values.
#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "sgp/data/partition.hpp"
#include "sgp/data/sharding.hpp"
#include "sgp/error.hpp"
#include "support/input_error.hpp"

using namespace sgp::data;

namespace {

// n samples, labels 0..classes-1 in turn (balanced).
std::vector<std::int32_t> balanced_labels(int n, int classes) {
  std::vector<std::int32_t> labels(n);
  for (int i = 0; i < n; ++i) labels[i] = i % classes;
  return labels;
}

void check_disjoint_and_covering(const std::vector<std::vector<std::size_t>>& parts,
                                 std::size_t n) {
  std::set<std::size_t> seen;
  for (const auto& part : parts)
    for (auto i : part) CHECK(seen.insert(i).second);
  CHECK(seen.size() == n);
  CHECK(*seen.rbegin() == n - 1);
}

// Mean over peers of the largest class's share of the peer's samples.
double mean_top_share(const std::vector<std::vector<std::size_t>>& parts,
                      const std::vector<std::int32_t>& labels, int classes) {
  double sum = 0.0;
  for (const auto& part : parts) {
    const auto counts = label_histogram(labels, classes, part);
    sum += static_cast<double>(*std::max_element(counts.begin(), counts.end())) / part.size();
  }
  return sum / parts.size();
}

// The InputError message of parsing `text` ("" when it parses).
std::string error_of(const std::string& text) {
  return sgp::testing::input_error_of([&] { parse_partition_spec(text); });
}

}  // namespace

TEST_CASE("every partition is disjoint, covers the set and is reproducible from its seed") {
  const auto labels = balanced_labels(6003, 10);
  for (const char* text : {"iid", "dirichlet:0.1", "dirichlet:1", "shards:2"}) {
    CAPTURE(text);
    const auto spec = parse_partition_spec(text);
    for (int peers : {1, 3, 8}) {
      const auto parts = make_partition(labels, 10, peers, spec, 5);
      REQUIRE(parts.size() == static_cast<std::size_t>(peers));
      check_disjoint_and_covering(parts, labels.size());
      for (const auto& part : parts) CHECK(part.size() >= kMinPartitionSamples);
    }
    CHECK(make_partition(labels, 10, 8, spec, 5) == make_partition(labels, 10, 8, spec, 5));
    CHECK(make_partition(labels, 10, 8, spec, 5) != make_partition(labels, 10, 8, spec, 6));
  }
}

TEST_CASE("iid is the split every run had before partitions existed") {
  const auto labels = balanced_labels(1000, 10);
  CHECK(make_partition(labels, 10, 4, parse_partition_spec("iid"), 3) == make_shards(1000, 4, 3));
}

TEST_CASE("dirichlet label skew grows as alpha shrinks") {
  const auto labels = balanced_labels(20000, 10);
  auto top_share = [&](double alpha) {
    PartitionSpec spec{PartitionSpec::Kind::dirichlet, alpha, 0};
    return mean_top_share(make_partition(labels, 10, 8, spec, 1), labels, 10);
  };
  const double skewed = top_share(0.1), mild = top_share(1.0), flat = top_share(1000.0);
  CHECK(skewed > 0.5);  // most of a peer's samples are of one class
  CHECK(mild > 0.2);
  CHECK(mild < skewed);
  CHECK(flat < 0.13);  // near the IID 0.1
  CHECK(flat < mild);
}

TEST_CASE("shards:K gives each peer K label-sorted shards: at most 2K labels, equal sizes") {
  const auto labels = balanced_labels(6000, 10);
  for (int k : {1, 2, 3}) {
    CAPTURE(k);
    const auto spec = parse_partition_spec("shards:" + std::to_string(k));
    const auto parts = make_partition(labels, 10, 5, spec, 2);
    std::size_t smallest = labels.size(), largest = 0;
    for (const auto& part : parts) {
      const auto counts = label_histogram(labels, 10, part);
      CHECK(std::count_if(counts.begin(), counts.end(), [](auto c) { return c > 0; }) <= 2 * k);
      smallest = std::min(smallest, part.size());
      largest = std::max(largest, part.size());
    }
    CHECK(largest - smallest <= static_cast<std::size_t>(k));
  }
  // 10 peers x 1 shard of 10 balanced classes: one label each.
  const auto parts = make_partition(labels, 10, 10, parse_partition_spec("shards:1"), 0);
  for (const auto& part : parts) {
    const auto counts = label_histogram(labels, 10, part);
    CHECK(std::count(counts.begin(), counts.end(), 0) == 9);
  }
}

TEST_CASE("partitions that cannot be made are refused with the reason") {
  const auto labels = balanced_labels(30, 10);
  CHECK_THROWS_WITH_AS(make_partition(labels, 10, 8, parse_partition_spec("shards:4"), 0),
                       "shards:4: 8 peers x 4 shards is more than the 30 samples", sgp::InputError);
  CHECK_THROWS_AS(make_partition(labels, 10, 31, parse_partition_spec("iid"), 0), sgp::InputError);
}

TEST_CASE("bad --partition values say what is expected") {
  CHECK(error_of("dirichlet:-1") ==
        "'dirichlet:-1' is not a partition: ALPHA of dirichlet:ALPHA must be a positive number, "
        "e.g. dirichlet:0.1");
  CHECK(error_of("dirichlet:") != "");
  CHECK(error_of("dirichlet:0.5x") != "");
  CHECK(error_of("shards:0") ==
        "'shards:0' is not a partition: K of shards:K must be an integer >= 1, e.g. shards:2");
  CHECK(error_of("label-skew") ==
        "'label-skew' is not a partition: expected iid, dirichlet:ALPHA or shards:K");
  CHECK(parse_partition_spec("dirichlet:0.25").alpha == 0.25);
  CHECK(parse_partition_spec("shards:3").shards_per_peer == 3);
}

TEST_CASE("the seeded generator: gamma moments and Dirichlet proportions") {
  SeededRandom random(11);
  for (double shape : {0.1, 0.5, 1.0, 3.0}) {
    CAPTURE(shape);
    const int n = 40000;
    double sum = 0.0, sum_sq = 0.0;
    bool negative = false;
    for (int i = 0; i < n; ++i) {
      const double g = random.gamma(shape);
      negative |= g < 0.0;
      sum += g;
      sum_sq += g * g;
    }
    CHECK(!negative);
    const double mean = sum / n, variance = sum_sq / n - mean * mean;
    CHECK(mean == doctest::Approx(shape).epsilon(0.05));      // Gamma(k, 1): mean k
    CHECK(variance == doctest::Approx(shape).epsilon(0.15));  // and variance k
  }
  const auto p = dirichlet(random, 0.3, 7);
  double total = 0.0;
  for (double v : p) total += v;
  CHECK(total == doctest::Approx(1.0));
  SeededRandom a(3), b(3);
  for (int i = 0; i < 100; ++i) CHECK(a.gamma(0.7) == b.gamma(0.7));
}
