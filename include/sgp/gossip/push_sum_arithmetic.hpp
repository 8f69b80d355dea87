#pragma once
// The arithmetic of one synchronous push-sum round at one peer, shared by PushSumEngine and the
// simulator (`sgp simulate`), so that both mix bit for bit alike:
//   keep: x *= float(p_ii), w *= p_ii           (before anything of the round is added)
//   add:  x += float(p_ji) * x_j, w += p_ji * w_j  (x_j: the sender's x, unscaled)
// x is float32 in the backend's memory, w a double.
#include <algorithm>
#include <cstddef>
#include <span>

#include "sgp/compute/backend.hpp"

namespace sgp::gossip {

inline void keep_share(compute::Backend& backend, float* x, std::size_t n, double self_weight) {
  backend.scale(x, n, static_cast<float>(self_weight));
}

inline double kept_weight(double w, double self_weight) { return w * self_weight; }

// One in-neighbour's share of a round: x += float(coefficient) * sender_x.
struct Share {
  double coefficient;     // p_ji
  const float* sender_x;  // as many floats as the x it is added to
};

// Host memory only: keep_share, then add_share of each of `shares` in order, bit for bit (the
// same operations on each element), but block by block, so that x is read and written once
// instead of once per pass. With a snapshot, it first gets x: the bytes an overlap round sends.
inline void keep_and_add_shares(float* x, std::size_t n, double self_weight,
                                std::span<const Share> shares, float* snapshot = nullptr) {
  constexpr std::size_t kBlock = 2048;  // 8 KiB of x, which stays in L1 between the passes
  const auto a = static_cast<float>(self_weight);
  for (std::size_t begin = 0; begin < n; begin += kBlock) {
    const std::size_t end = std::min(n, begin + kBlock);
    if (snapshot != nullptr) std::copy(x + begin, x + end, snapshot + begin);
    for (std::size_t i = begin; i < end; ++i) x[i] *= a;
    for (const Share& s : shares) {
      const auto c = static_cast<float>(s.coefficient);
      for (std::size_t i = begin; i < end; ++i) x[i] += c * s.sender_x[i];
    }
  }
}

inline void add_share(compute::Backend& backend, double coefficient, const float* sender_x,
                      float* x, std::size_t n) {
  backend.axpy(static_cast<float>(coefficient), sender_x, x, n);
}

inline double added_weight(double w, double coefficient, double sender_w) {
  return w + coefficient * sender_w;
}

}  // namespace sgp::gossip
