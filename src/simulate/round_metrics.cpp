#include "round_metrics.hpp"

#include <algorithm>

namespace sgp::simulate {
namespace {

constexpr std::size_t kBlock = 256;

// live_ranks: the peers that count; inverse_w and w indexed by rank.
template <typename T>
void add_block(const T* x, const std::vector<double>& inverse_w, const std::vector<double>& w,
               const std::vector<std::size_t>& live_ranks, std::size_t stride,
               const std::vector<double>& target, std::size_t k0, std::size_t len,
               std::vector<double>& zbar, RoundSums& s) {
  std::fill(zbar.begin(), zbar.begin() + static_cast<std::ptrdiff_t>(len), 0.0);
  for (const std::size_t i : live_ranks) {
    const T* xi = x + i * stride + k0;
    for (std::size_t k = 0; k < len; ++k) zbar[k] += static_cast<double>(xi[k]) * inverse_w[i];
  }
  for (std::size_t k = 0; k < len; ++k) {
    zbar[k] /= static_cast<double>(live_ranks.size());
    s.zbar2 += zbar[k] * zbar[k];
    s.target2 += target[k0 + k] * target[k0 + k];
    const double d = zbar[k] - target[k0 + k];
    s.zbar_target += d * d;
  }
  for (const std::size_t i : live_ranks) {
    const T* xi = x + i * stride + k0;
    for (std::size_t k = 0; k < len; ++k) {
      const double xv = static_cast<double>(xi[k]);
      const double z = xv * inverse_w[i];
      const double t = target[k0 + k];
      s.consensus += (z - zbar[k]) * (z - zbar[k]);
      s.target += (z - t) * (z - t);
      s.deviation += (xv - t * w[i]) * (xv - t * w[i]);
    }
  }
}

}  // namespace

template <typename T>
RoundSums round_sums(PeerPool& pool, const T* x, std::size_t stride, const std::vector<double>& w,
                     const std::vector<bool>& live, std::size_t dim,
                     const std::vector<double>& target) {
  std::vector<double> inverse_w(w.size(), 0.0);
  std::vector<std::size_t> live_ranks;
  RoundSums total;
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (!live[i]) continue;
    live_ranks.push_back(i);
    inverse_w[i] = 1.0 / w[i];
    total.sum_w += w[i];
  }
  total.live = static_cast<int>(live_ranks.size());
  // One partial sum per block of coordinates, added in block order: the same figures whatever
  // the number of threads.
  const std::size_t blocks = (dim + kBlock - 1) / kBlock;
  std::vector<RoundSums> parts(blocks);
  pool.for_ranges(blocks, [&](int, std::size_t begin, std::size_t end) {
    std::vector<double> zbar(kBlock);
    for (std::size_t b = begin; b < end; ++b) {
      const std::size_t k0 = b * kBlock;
      add_block(x, inverse_w, w, live_ranks, stride, target, k0, std::min(kBlock, dim - k0), zbar,
                parts[b]);
    }
  });
  for (const auto& p : parts) {
    total.consensus += p.consensus;
    total.zbar2 += p.zbar2;
    total.target += p.target;
    total.target2 += p.target2;
    total.deviation += p.deviation;
    total.zbar_target += p.zbar_target;
  }
  return total;
}

template RoundSums round_sums<float>(PeerPool&, const float*, std::size_t,
                                     const std::vector<double>&, const std::vector<bool>&,
                                     std::size_t, const std::vector<double>&);
template RoundSums round_sums<double>(PeerPool&, const double*, std::size_t,
                                      const std::vector<double>&, const std::vector<bool>&,
                                      std::size_t, const std::vector<double>&);

}  // namespace sgp::simulate
