#include "sgp/topology/finite_time.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <utility>

#include "sgp/error.hpp"

namespace sgp::topology {

namespace {

// One round under construction: every rank starts idle (keeps all its mass) and is given at most
// one role per round (SGP_ENFORCE), which is what keeps the construction's pieces apart.
struct Round {
  explicit Round(int n) : out(n), self(n, 1.0), busy(n, false) {}
  std::vector<std::vector<Push>> out;
  std::vector<double> self;
  std::vector<bool> busy;

  void claim(int rank, double self_weight) {
    SGP_ENFORCE(!busy[rank], "rank {} is given two roles in one round", rank);
    busy[rank] = true;
    self[rank] = self_weight;
  }
};

// Rounds of one schedule under construction; rounds are added (idle) as pieces need them.
class Builder {
 public:
  explicit Builder(int n) : n_(n) {}

  Round& round(int index) {
    while (static_cast<int>(rounds_.size()) <= index) rounds_.emplace_back(n_);
    return rounds_[index];
  }
  int period() const { return static_cast<int>(rounds_.size()); }

  // Every member keeps 1/m and gives 1/m to each of the other m - 1: the group's exact mean.
  void average_group(int index, const std::vector<int>& members) {
    Round& r = round(index);
    const double w = 1.0 / static_cast<double>(members.size());
    for (int i : members) {
      r.claim(i, w);
      for (int j : members)
        if (j != i) r.out[i].push_back({j, w});
    }
  }

  // H_k on `members` (listed in mixed-radix order) with these factors, from round `first` on.
  void hyper_hypercube(int first, const std::vector<int>& members,
                       const std::vector<int>& factors) {
    int stride = 1;
    for (std::size_t l = 0; l < factors.size(); ++l) {
      const int f = factors[l];
      for (int t = 0; t < static_cast<int>(members.size()); ++t) {
        if ((t / stride) % f != 0) continue;  // t is the group's member with digit l = 0
        std::vector<int> group;
        for (int d = 0; d < f; ++d) group.push_back(members[t + d * stride]);
        average_group(first + static_cast<int>(l), group);
      }
      stride *= f;
    }
  }

  // `pairer` exchanges weight c with each partner (symmetric): it keeps 1 - c * partners.
  void merge(int index, int pairer, const std::vector<int>& partners, double c) {
    Round& r = round(index);
    r.claim(pairer, 1.0 - c * static_cast<double>(partners.size()));
    for (int j : partners) {
      r.claim(j, 1.0 - c);
      r.out[pairer].push_back({j, c});
      r.out[j].push_back({pairer, c});
    }
  }

  // The rounds of `piece` (built on `piece_ranks` ranks) with piece rank q mapped to members[q],
  // from round `first` on.
  void embed(int first, const Builder& piece, const std::vector<int>& members) {
    for (int p = 0; p < piece.period(); ++p) {
      Round& r = round(first + p);
      const Round& from = piece.rounds_[p];
      for (int q = 0; q < static_cast<int>(members.size()); ++q) {
        if (!from.busy[q]) continue;
        r.claim(members[q], from.self[q]);
        for (const Push& push : from.out[q])
          r.out[members[q]].push_back({members[push.peer], push.weight});
      }
    }
  }

  std::int64_t messages() const {
    std::int64_t count = 0;
    for (const Round& r : rounds_)
      for (const auto& pushes : r.out) count += static_cast<std::int64_t>(pushes.size());
    return count;
  }

  Schedule schedule() const {
    std::vector<std::vector<std::vector<Push>>> edges;
    std::vector<std::vector<double>> selves;
    for (const Round& r : rounds_) {
      edges.push_back(r.out);
      selves.push_back(r.self);
    }
    if (edges.empty()) {  // a single rank: one idle round
      edges.emplace_back(n_);
      selves.emplace_back(n_, 1.0);
    }
    return Schedule(n_, std::move(edges), std::move(selves));
  }

 private:
  int n_;
  std::vector<Round> rounds_;
};

std::vector<int> range(int first, int count) {
  std::vector<int> v(count);
  for (int i = 0; i < count; ++i) v[i] = first + i;
  return v;
}

std::vector<int> factors_or_throw(int n, int k) {
  auto factors = hyper_hypercube_factors(n, k);
  SGP_ENFORCE(factors.has_value(), "{} has a prime factor above {}", n, k + 1);
  return *factors;
}

// base^exponent in 64 bits: (k+1)^(p+1) may pass 2^31 on the way to the first power above n.
std::int64_t int_pow(int base, int exponent) {
  std::int64_t v = 1;
  for (int e = 0; e < exponent; ++e) v *= base;
  return v;
}

// A block of the base-(k+1) split: `size` = digit * (k+1)^power consecutive ranks from `first`.
struct Block {
  int first = 0;
  int size = 0;
  int digit = 0;
  int power = 0;
};

std::vector<Block> base_digits(int n, int k) {
  std::vector<Block> blocks;
  int power = 0;
  while (int_pow(k + 1, power + 1) <= n) ++power;
  for (int first = 0; power >= 0; --power) {
    const int unit = static_cast<int>(int_pow(k + 1, power));
    const int digit = (n - first) / unit;
    if (digit == 0) continue;
    blocks.push_back({first, digit * unit, digit, power});
    first += digit * unit;
  }
  return blocks;
}

// Simple Base-(k+1) on ranks 0..n-1 (see the header).
Builder simple_base(int n, int k) {
  Builder b(n);
  if (const auto factors = hyper_hypercube_factors(n, k)) {
    b.hyper_hypercube(0, range(0, n), *factors);
    return b;
  }
  const std::vector<Block> blocks = base_digits(n, k);
  for (const Block& block : blocks)
    b.hyper_hypercube(0, range(block.first, block.size), factors_or_throw(block.size, k));
  const int merge_start = b.period();
  for (std::size_t m = 0; m + 1 < blocks.size(); ++m) {
    const Block& receiver = blocks[m];
    const int unit = static_cast<int>(int_pow(k + 1, receiver.power));  // a receiver sub-block
    const int rest_first = blocks[m + 1].first;  // the smaller blocks run to n
    const double c = static_cast<double>(unit) / static_cast<double>(n - receiver.first);
    SGP_ENFORCE(n - rest_first < unit, "block {} cannot take {} partners", m, n - rest_first);
    const int round = merge_start + static_cast<int>(m);
    for (int q = 0; q < n - rest_first; ++q) {
      std::vector<int> partners;
      for (int s = 0; s < receiver.digit; ++s) partners.push_back(receiver.first + s * unit + q);
      b.merge(round, rest_first + q, partners, c);
    }
    for (int s = 0; s < receiver.digit; ++s)
      b.hyper_hypercube(round + 1, range(receiver.first + s * unit, unit),
                        factors_or_throw(unit, k));
  }
  return b;
}

// N = n_pow * r: Simple(r) in groups of r consecutive ranks, then H_k(n_pow) across the groups.
std::optional<Builder> split_base(int n, int k) {
  int r = n;
  for (int prime = 2; prime <= k + 1; ++prime)
    while (r % prime == 0) r /= prime;
  const int n_pow = n / r;
  if (r == 1 || n_pow == 1) return std::nullopt;  // H_k itself, or Simple(n) itself
  const Builder inner = simple_base(r, k);
  Builder b(n);
  for (int g = 0; g < n_pow; ++g) b.embed(0, inner, range(g * r, r));
  const std::vector<int> factors = factors_or_throw(n_pow, k);
  const int first = b.period();
  for (int position = 0; position < r; ++position) {
    std::vector<int> column;
    for (int g = 0; g < n_pow; ++g) column.push_back(g * r + position);
    b.hyper_hypercube(first, column, factors);
  }
  return b;
}

}  // namespace

std::optional<std::vector<int>> hyper_hypercube_factors(int n, int k) {
  SGP_ENFORCE(n >= 1 && k >= 1, "hyper-hypercube of {} ranks with degree {}", n, k);
  // fewest[m]: the fewest factors of m, for every divisor m of n (memoized, largest factor first).
  std::map<int, std::optional<std::vector<int>>> fewest;
  auto solve = [&](auto&& self, int m) -> std::optional<std::vector<int>> {
    if (m == 1) return std::vector<int>{};
    if (const auto found = fewest.find(m); found != fewest.end()) return found->second;
    std::optional<std::vector<int>> best;
    for (int f = std::min(k + 1, m); f >= 2; --f) {
      if (m % f != 0) continue;
      auto rest = self(self, m / f);
      if (!rest || (best && rest->size() + 1 >= best->size())) continue;
      rest->insert(rest->begin(), f);
      best = std::move(rest);
    }
    if (best) std::sort(best->begin(), best->end(), std::greater<>());
    fewest[m] = best;
    return best;
  };
  return solve(solve, n);
}

Schedule hyper_hypercube_schedule(int n, int k) {
  Builder b(n);
  b.hyper_hypercube(0, range(0, n), factors_or_throw(n, k));
  return b.schedule();
}

Schedule base_schedule(int n, int k) {
  SGP_ENFORCE(n >= 1 && k >= 1, "base graph of {} ranks with degree {}", n, k);
  Builder simple = simple_base(n, k);
  const std::optional<Builder> split = split_base(n, k);
  const bool split_wins =
      split && (split->period() < simple.period() ||
                (split->period() == simple.period() && split->messages() < simple.messages()));
  return split_wins ? split->schedule() : simple.schedule();
}

}  // namespace sgp::topology
