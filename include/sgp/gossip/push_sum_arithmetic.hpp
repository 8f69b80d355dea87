#pragma once
// The arithmetic of one synchronous push-sum round at one peer, shared by PushSumEngine and the
// simulator (`sgp simulate`), so that both mix bit for bit alike:
//   keep: x *= float(p_ii), w *= p_ii           (before anything of the round is added)
//   add:  x += float(p_ji) * x_j, w += p_ji * w_j  (x_j: the sender's x, unscaled)
// x is float32 in the backend's memory, w a double.
#include <cstddef>

#include "sgp/compute/backend.hpp"

namespace sgp::gossip {

inline void keep_share(compute::Backend& backend, float* x, std::size_t n, double self_weight) {
  backend.scale(x, n, static_cast<float>(self_weight));
}

inline double kept_weight(double w, double self_weight) { return w * self_weight; }

// Host memory only: snapshot = x, then keep_share, in one pass over x (the bytes an overlap
// round sends and the share x keeps, bit for bit what a copy and then keep_share give).
inline void snapshot_and_keep_share(float* x, float* snapshot, std::size_t n, double self_weight) {
  const auto a = static_cast<float>(self_weight);
  for (std::size_t i = 0; i < n; ++i) {
    snapshot[i] = x[i];
    x[i] *= a;
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
