#pragma once
// im2col and its adjoint col2im over NHWC image batches (geometry: sgp/compute/window.hpp); the
// CPU reference is in src/compute/cpu_window_ops.cpp. One thread per output element, grid-stride.
#include <cuda_runtime_api.h>

#include "kernels/launch.cuh"
#include "sgp/compute/window.hpp"

namespace sgp::kernels {

// cols [positions x patch] from x; 0 for entries in the padding.
cudaError_t im2col(const float* x, const compute::Window& w, float* cols, const Launch& launch);
// dx [input_size] = for each input element, the sum of the cols entries that read it (a gather:
// deterministic, no atomics).
cudaError_t col2im(const float* cols, const compute::Window& w, float* dx, const Launch& launch);

}  // namespace sgp::kernels
