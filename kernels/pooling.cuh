#pragma once
// Max and average pooling over NHWC image batches, padding 0 (geometry: sgp/compute/window.hpp);
// the CPU reference is in src/compute/cpu_window_ops.cpp. One thread per output element in the
// forward passes; windows are scanned in the same order as on the CPU, so the results (and the
// argmax on ties: the first maximum) are the same.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/launch.cuh"
#include "sgp/compute/window.hpp"

namespace sgp::kernels {

cudaError_t max_pool_forward(const float* x, const compute::Window& w, float* y,
                             std::int32_t* argmax, const Launch& launch);
// dx = 0, then dx[argmax[o]] += dy[o] (atomic adds: in an order that only matters, in the last
// bits, when windows overlap, i.e. stride < kernel).
cudaError_t max_pool_backward(const float* dy, const std::int32_t* argmax, const compute::Window& w,
                              float* dx, const Launch& launch);
cudaError_t avg_pool_forward(const float* x, const compute::Window& w, float* y,
                             const Launch& launch);
// A gather: each input element sums dy / kernel^2 over the windows that contain it.
cudaError_t avg_pool_backward(const float* dy, const compute::Window& w, float* dx,
                              const Launch& launch);

}  // namespace sgp::kernels
