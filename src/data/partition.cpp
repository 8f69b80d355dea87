#include "sgp/data/partition.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "sgp/data/sharding.hpp"
#include "sgp/error.hpp"

namespace sgp::data {

namespace {

constexpr int kMaxDirichletDraws = 1000;

// Every class's sample indices, each list shuffled.
std::vector<std::vector<std::size_t>> shuffled_by_class(const std::vector<std::int32_t>& labels,
                                                        int num_classes, SeededRandom& random) {
  std::vector<std::vector<std::size_t>> classes(num_classes);
  for (std::size_t i = 0; i < labels.size(); ++i) {
    SGP_ENFORCE(labels[i] >= 0 && labels[i] < num_classes, "label {} of sample {} outside 0..{}",
                labels[i], i, num_classes - 1);
    classes[labels[i]].push_back(i);
  }
  for (auto& members : classes) seeded_shuffle(members, random.bits());
  return classes;
}

// One Dirichlet draw: each class cut by its own proportions over the peers.
std::vector<std::vector<std::size_t>> dirichlet_draw(
    const std::vector<std::vector<std::size_t>>& classes, int num_peers, double alpha,
    SeededRandom& random) {
  std::vector<std::vector<std::size_t>> parts(num_peers);
  for (const auto& members : classes) {
    const std::vector<double> p = dirichlet(random, alpha, num_peers);
    const auto n = static_cast<double>(members.size());
    double cumulative = 0.0;
    std::size_t begin = 0;
    for (int peer = 0; peer < num_peers; ++peer) {
      cumulative += p[peer];
      const std::size_t end =
          peer + 1 == num_peers
              ? members.size()
              : std::min(members.size(),
                         static_cast<std::size_t>(std::floor(cumulative * n + 0.5)));
      parts[peer].insert(parts[peer].end(), members.begin() + begin, members.begin() + end);
      begin = std::max(begin, end);
    }
  }
  return parts;
}

std::vector<std::vector<std::size_t>> dirichlet_partition(const std::vector<std::int32_t>& labels,
                                                          int num_classes, int num_peers,
                                                          double alpha, std::uint64_t seed) {
  SeededRandom random(seed);
  const auto classes = shuffled_by_class(labels, num_classes, random);
  const std::size_t minimum = std::min(kMinPartitionSamples, labels.size() / num_peers);
  for (int draw = 0; draw < kMaxDirichletDraws; ++draw) {
    auto parts = dirichlet_draw(classes, num_peers, alpha, random);
    const bool enough = std::all_of(parts.begin(), parts.end(),
                                    [&](const auto& part) { return part.size() >= minimum; });
    if (enough) return parts;
  }
  throw InputError(fmt::format(
      "dirichlet:{}: in {} draws some peer of {} always got fewer than {} samples; use a larger "
      "alpha or fewer peers",
      alpha, kMaxDirichletDraws, num_peers, minimum));
}

std::vector<std::vector<std::size_t>> shard_partition(const std::vector<std::int32_t>& labels,
                                                      int num_classes, int num_peers, int per_peer,
                                                      std::uint64_t seed) {
  const std::size_t count = static_cast<std::size_t>(num_peers) * per_peer;
  if (count > labels.size()) {
    throw InputError(fmt::format("shards:{}: {} peers x {} shards is more than the {} samples",
                                 per_peer, num_peers, per_peer, labels.size()));
  }
  SeededRandom random(seed);
  std::vector<std::size_t> sorted;  // by label, shuffled within each label
  for (const auto& members : shuffled_by_class(labels, num_classes, random)) {
    sorted.insert(sorted.end(), members.begin(), members.end());
  }
  std::vector<std::size_t> owner(count);  // shard s goes to peer owner[s] (K shards each)
  for (std::size_t s = 0; s < count; ++s) owner[s] = s / per_peer;
  seeded_shuffle(owner, random.bits());
  std::vector<std::vector<std::size_t>> parts(num_peers);
  const std::size_t base = sorted.size() / count, extra = sorted.size() % count;
  std::size_t begin = 0;
  for (std::size_t s = 0; s < count; ++s) {
    const std::size_t size = base + (s < extra ? 1 : 0);
    auto& part = parts[owner[s]];
    part.insert(part.end(), sorted.begin() + begin, sorted.begin() + begin + size);
    begin += size;
  }
  return parts;
}

}  // namespace

PartitionSpec parse_partition_spec(std::string_view text) {
  auto fail = [&](const std::string& why) {
    return InputError(fmt::format("'{}' is not a partition: {}", text, why));
  };
  PartitionSpec spec;
  if (text == "iid") return spec;
  const auto colon = text.find(':');
  const std::string_view kind = text.substr(0, colon);
  const std::string_view value = colon == std::string_view::npos ? "" : text.substr(colon + 1);
  if (kind == "dirichlet") {
    double alpha = 0.0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), alpha);
    if (value.empty() || ec != std::errc() || end != value.data() + value.size() ||
        !(alpha > 0.0) || !std::isfinite(alpha)) {
      throw fail("ALPHA of dirichlet:ALPHA must be a positive number, e.g. dirichlet:0.1");
    }
    spec.kind = PartitionSpec::Kind::dirichlet;
    spec.alpha = alpha;
  } else if (kind == "shards") {
    int k = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), k);
    if (value.empty() || ec != std::errc() || end != value.data() + value.size() || k < 1) {
      throw fail("K of shards:K must be an integer >= 1, e.g. shards:2");
    }
    spec.kind = PartitionSpec::Kind::shards;
    spec.shards_per_peer = k;
  } else {
    throw fail("expected iid, dirichlet:ALPHA or shards:K");
  }
  return spec;
}

std::vector<std::vector<std::size_t>> make_partition(const std::vector<std::int32_t>& labels,
                                                     int num_classes, int num_peers,
                                                     const PartitionSpec& spec,
                                                     std::uint64_t seed) {
  SGP_ENFORCE(num_peers >= 1 && num_classes >= 1, "{} peers, {} classes", num_peers, num_classes);
  if (labels.size() < static_cast<std::size_t>(num_peers)) {
    throw InputError(
        fmt::format("cannot split {} samples across {} peers", labels.size(), num_peers));
  }
  switch (spec.kind) {
    case PartitionSpec::Kind::iid:
      return make_shards(labels.size(), num_peers, seed);
    case PartitionSpec::Kind::dirichlet:
      return dirichlet_partition(labels, num_classes, num_peers, spec.alpha, seed);
    case PartitionSpec::Kind::shards:
      return shard_partition(labels, num_classes, num_peers, spec.shards_per_peer, seed);
  }
  return {};
}

std::vector<std::int64_t> label_histogram(const std::vector<std::int32_t>& labels, int num_classes,
                                          const std::vector<std::size_t>& indices) {
  std::vector<std::int64_t> counts(num_classes, 0);
  for (std::size_t i : indices) ++counts.at(labels.at(i));
  return counts;
}

std::vector<double> dirichlet(SeededRandom& random, double alpha, int size) {
  std::vector<double> p(size);
  double sum = 0.0;
  while (!(sum > 0.0)) {  // all gammas underflowing to 0 (tiny alpha): draw again
    sum = 0.0;
    for (double& v : p) sum += v = random.gamma(alpha);
  }
  for (double& v : p) v /= sum;
  return p;
}

}  // namespace sgp::data
