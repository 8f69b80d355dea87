#include "sgp/simulate/compressed_population.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <utility>

#include "sgp/data/seeded_random.hpp"
#include "sgp/error.hpp"

namespace sgp::simulate {

using compress::copy_scale;

CompressedPopulation::CompressedPopulation(topology::Schedule schedule, std::size_t dim,
                                           compress::Compressor c, double gamma, std::uint64_t seed,
                                           PeerPool& pool)
    : schedule_(std::move(schedule)),
      dim_(dim),
      compressor_(c),
      gamma_(gamma),
      seed_(seed),
      copy_scale_(copy_scale(c, dim)),
      pool_(pool),
      x_(static_cast<std::size_t>(peers()) * dim, 0.0),
      xhat_(x_.size(), 0.0),
      next_(x_.size(), 0.0),
      w_(static_cast<std::size_t>(peers()), 1.0),
      next_w_(w_.size(), 0.0),
      difference_(static_cast<std::size_t>(pool.threads()), std::vector<float>(dim)) {
  SGP_ENFORCE(gamma > 0.0 && gamma <= 1.0, "consensus step {} outside (0, 1]", gamma);
  for (int r = 0; r < peers(); ++r) recipients_.push_back(schedule_.all_out_neighbors(r).size());
}

std::uint64_t CompressedPopulation::mix(std::int64_t round) {
  const std::uint64_t bytes = update_public_copies(round);
  mix_copies(round);
  std::swap(x_, next_);
  std::swap(w_, next_w_);
  return bytes;
}

std::uint64_t CompressedPopulation::update_public_copies(std::int64_t round) {
  std::atomic<std::uint64_t> bytes{0};
  pool_.for_ranges(x_.size() / dim_, [&](int worker, std::size_t begin, std::size_t end) {
    auto& d = difference_[static_cast<std::size_t>(worker)];
    std::uint64_t sent = 0;
    for (std::size_t i = begin; i < end; ++i) {
      const int rank = static_cast<int>(i);
      const auto x = std::span<const double>(x_).subspan(offset(rank), dim_);
      auto xhat = std::span<double>(xhat_).subspan(offset(rank), dim_);
      double squares = 0.0;
      for (std::size_t k = 0; k < dim_; ++k) {
        d[k] = static_cast<float>(x[k] - xhat[k]);
        squares += static_cast<double>(d[k]) * d[k];
      }
      // A diverging step size: a difference (or qsgd's norm) past float32, nothing can be
      // encoded, and the run stops.
      if (!std::isfinite(static_cast<float>(std::sqrt(squares)))) {
        diverged_ = true;
        continue;
      }
      const std::uint64_t seed =
          data::splitmix64(seed_ ^ data::splitmix64((static_cast<std::uint64_t>(round) << 20) + i));
      const auto payload = compress::encode(compressor_, d, seed);
      compress::decode_add(compressor_, std::span<const std::uint8_t>(payload), xhat, copy_scale_);
      sent += payload.size() * recipients_[i];
    }
    bytes += sent;
  });
  return bytes;
}

void CompressedPopulation::mix_copies(std::int64_t round) {
  pool_.for_ranges(x_.size() / dim_, [&](int, std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      const int rank = static_cast<int>(i);
      double pushed = 0.0;  // c_i: what rank i gives away this round
      for (const auto& push : schedule_.out_edges(rank, round)) pushed += push.weight;
      const double* own = xhat_.data() + offset(rank);
      const double* x = x_.data() + offset(rank);
      double* next = next_.data() + offset(rank);
      for (std::size_t k = 0; k < dim_; ++k) next[k] = -pushed * own[k];
      double w_in = -pushed * w_[i];
      for (int sender : schedule_.in_neighbors(rank, round)) {
        const double p = schedule_.push_weight(sender, rank, round);
        const double* theirs = xhat_.data() + offset(sender);
        for (std::size_t k = 0; k < dim_; ++k) next[k] += p * theirs[k];
        w_in += p * w_[static_cast<std::size_t>(sender)];
      }
      for (std::size_t k = 0; k < dim_; ++k) next[k] = x[k] + gamma_ * next[k];
      next_w_[i] = w_[i] + gamma_ * w_in;
    }
  });
}

}  // namespace sgp::simulate
