#pragma once
// Fused softmax + cross-entropy (loss and gradient in one pass) and arg-max accuracy; one warp per
// row, so they suit the narrow logits of a classifier (any width works).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/launch.cuh"

namespace sgp::kernels {

// result->value = sum over rows of -log softmax(logits[r])[labels[r]] (double); the caller divides
// by rows. If dlogits is not null: dlogits[r, c] = (softmax[r, c] - (c == label)) * inv_rows.
// A label outside 0..cols-1 sets result->first_bad_row (the caller must have set it to
// kNoBadRow); that row's loss is NaN and its gradient is the plain softmax. partials: kMaxPartials
// doubles of device scratch. rows >= 1, cols >= 1.
cudaError_t softmax_cross_entropy(const float* logits, const std::int32_t* labels, int rows,
                                  int cols, float inv_rows, float* dlogits, double* partials,
                                  ReductionResult* result, const Launch& launch);

// result->count += number of rows whose first arg-max equals the label (the caller zeroes it).
cudaError_t count_correct(const float* logits, const std::int32_t* labels, int rows, int cols,
                          ReductionResult* result, const Launch& launch);

}  // namespace sgp::kernels
