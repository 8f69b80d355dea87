#pragma once
// Reductions: squared norm / distance (double accumulation, deterministic two-pass: per-block
// partial sums, then one block sums the partials in a fixed order) and column sums (bias grad).
#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/launch.cuh"

namespace sgp::kernels {

// *out = sum_i (a[i] - b[i])^2, or sum_i a[i]^2 when b is null. partials: kMaxPartials doubles
// of scratch in device memory. out: device memory.
cudaError_t squared_distance(const float* a, const float* b, std::size_t n, double* partials,
                             double* out, const Launch& launch);

// db[c] = sum_r dy[r, c] for dy [rows x cols] row-major.
cudaError_t column_sums(const float* dy, int rows, int cols, float* db, const Launch& launch);

// *out = sum of partials[0 .. count); one block, fixed order. count <= kMaxPartials.
cudaError_t sum_partials(const double* partials, int count, double* out, const Launch& launch);

}  // namespace sgp::kernels
