#include <climits>
#include <cmath>

#include "kernels/block_reduce.cuh"
#include "kernels/reductions.cuh"
#include "kernels/softmax_cross_entropy.cuh"

namespace sgp::kernels {

namespace {

// Warp w of block b handles rows b * kWarpsPerBlock + w, then strides by the whole grid. Lane 0
// of each warp accumulates its rows' losses; the block writes their sum to partials[b].
__global__ void __launch_bounds__(kThreads)
    softmax_xent_kernel(const float* logits, const std::int32_t* labels, int rows, int cols,
                        float inv_rows, float* dlogits, double* partials,
                        unsigned int* first_bad_row) {
  __shared__ double warp_loss[kWarpsPerBlock];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  double loss = 0.0;
  for (int r = blockIdx.x * kWarpsPerBlock + warp; r < rows; r += gridDim.x * kWarpsPerBlock) {
    const float* row = logits + static_cast<std::size_t>(r) * cols;
    const int label = labels[r];
    const bool valid = label >= 0 && label < cols;
    if (!valid && lane == 0) atomicMin(first_bad_row, static_cast<unsigned int>(r));

    float max = -INFINITY;
    for (int c = lane; c < cols; c += 32) max = fmaxf(max, row[c]);
    max = warp_all_max(max);
    double sum = 0.0;
    for (int c = lane; c < cols; c += 32) sum += exp(static_cast<double>(row[c] - max));
    sum = warp_all_sum(sum);
    if (lane == 0) {
      // Same expression as the CPU reference: log(sum) + max - logit of the label.
      loss += valid ? log(sum) + max - row[label] : static_cast<double>(NAN);
    }
    if (dlogits != nullptr) {
      float* grad = dlogits + static_cast<std::size_t>(r) * cols;
      const double inv_sum = 1.0 / sum;
      for (int c = lane; c < cols; c += 32) {
        const float p = static_cast<float>(exp(static_cast<double>(row[c] - max)) * inv_sum);
        grad[c] = (p - (c == label ? 1.0f : 0.0f)) * inv_rows;
      }
    }
  }
  if (lane == 0) warp_loss[warp] = loss;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0.0;
    for (int w = 0; w < kWarpsPerBlock; ++w) total += warp_loss[w];
    partials[blockIdx.x] = total;
  }
}

__global__ void __launch_bounds__(kThreads)
    count_correct_kernel(const float* logits, const std::int32_t* labels, int rows, int cols,
                         unsigned long long* count) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  unsigned long long correct = 0;
  for (int r = blockIdx.x * kWarpsPerBlock + warp; r < rows; r += gridDim.x * kWarpsPerBlock) {
    const float* row = logits + static_cast<std::size_t>(r) * cols;
    // Like std::max_element: the first of equal maxima. INT_MAX marks a lane with no column.
    float best = -INFINITY;
    int best_index = INT_MAX;
    for (int c = lane; c < cols; c += 32) {
      const float v = row[c];
      if (best_index == INT_MAX || v > best) {
        best = v;
        best_index = c;
      }
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
      const float other = __shfl_xor_sync(kFullWarp, best, offset);
      const int other_index = __shfl_xor_sync(kFullWarp, best_index, offset);
      if (other > best || (other == best && other_index < best_index)) {
        best = other;
        best_index = other_index;
      }
    }
    if (lane == 0 && best_index == labels[r]) ++correct;
  }
  if (lane == 0 && correct > 0) atomicAdd(count, correct);
}

int row_grid(int rows, int max_blocks) {
  const int cap = max_blocks < kMaxPartials ? max_blocks : kMaxPartials;
  const int wanted = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  return wanted < 1 ? 1 : (wanted < cap ? wanted : cap);
}

}  // namespace

cudaError_t softmax_cross_entropy(const float* logits, const std::int32_t* labels, int rows,
                                  int cols, float inv_rows, float* dlogits, double* partials,
                                  ReductionResult* result, const Launch& launch) {
  const int grid = row_grid(rows, launch.max_blocks);
  softmax_xent_kernel<<<grid, kThreads, 0, launch.stream>>>(
      logits, labels, rows, cols, inv_rows, dlogits, partials, &result->first_bad_row);
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) return status;
  return sum_partials(partials, grid, &result->value, launch);
}

cudaError_t count_correct(const float* logits, const std::int32_t* labels, int rows, int cols,
                          ReductionResult* result, const Launch& launch) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  count_correct_kernel<<<row_grid(rows, launch.max_blocks), kThreads, 0, launch.stream>>>(
      logits, labels, rows, cols, &result->count);
  return cudaGetLastError();
}

}  // namespace sgp::kernels
