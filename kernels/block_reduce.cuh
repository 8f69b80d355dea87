#pragma once
// Device-only helpers shared by the reduction kernels (include from .cu files only).
#include <cuda_runtime.h>

#include "kernels/launch.cuh"

namespace sgp::kernels {

inline constexpr unsigned kFullWarp = 0xFFFFFFFFu;
inline constexpr int kWarpsPerBlock = kThreads / 32;

// Sum over the 32 lanes of a warp; every lane receives the total (fixed order: deterministic).
template <class T>
__device__ __forceinline__ T warp_all_sum(T v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullWarp, v, offset);
  return v;
}

__device__ __forceinline__ float warp_all_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    v = fmaxf(v, __shfl_xor_sync(kFullWarp, v, offset));
  }
  return v;
}

// Sum over a block of kThreads threads; the result is valid in thread 0 only. `scratch` is a
// __shared__ array of kWarpsPerBlock doubles. Fixed order: the same inputs give the same bits.
__device__ __forceinline__ double block_sum(double v, double* scratch) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  v = warp_all_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kWarpsPerBlock ? scratch[lane] : 0.0;
    v = warp_all_sum(v);
  }
  return v;
}

// Grid size of a grid-stride loop over `work` items: enough blocks for the work, at most `cap`.
inline int grid_for(std::size_t work, int cap) {
  const std::size_t wanted = (work + kThreads - 1) / kThreads;
  if (wanted < 1) return 1;
  return wanted < static_cast<std::size_t>(cap) ? static_cast<int>(wanted) : cap;
}

}  // namespace sgp::kernels
