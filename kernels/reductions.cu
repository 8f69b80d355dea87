#include <cstdint>

#include "kernels/block_reduce.cuh"
#include "kernels/reductions.cuh"

namespace sgp::kernels {

namespace {

template <bool kDistance>
__device__ __forceinline__ double squared(float a, float b) {
  const double d =
      kDistance ? static_cast<double>(a) - static_cast<double>(b) : static_cast<double>(a);
  return d * d;
}

// Each block writes the sum over its grid-stride share to partials[blockIdx.x].
template <bool kDistance>
__global__ void __launch_bounds__(kThreads)
    squared_kernel(const float* a, const float* b, std::size_t n_vec, std::size_t n,
                   double* partials) {
  __shared__ double scratch[kWarpsPerBlock];
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t tid = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  double sum = 0.0;
  const float4* a4 = reinterpret_cast<const float4*>(a);
  const float4* b4 = reinterpret_cast<const float4*>(b);
  for (std::size_t i = tid; i < n_vec; i += stride) {
    const float4 x = a4[i];
    const float4 y = kDistance ? b4[i] : x;
    sum += squared<kDistance>(x.x, y.x) + squared<kDistance>(x.y, y.y) +
           squared<kDistance>(x.z, y.z) + squared<kDistance>(x.w, y.w);
  }
  for (std::size_t i = 4 * n_vec + tid; i < n; i += stride) {
    sum += squared<kDistance>(a[i], kDistance ? b[i] : 0.0f);
  }
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

__global__ void __launch_bounds__(kThreads)
    sum_partials_kernel(const double* partials, int count, double* out) {
  __shared__ double scratch[kWarpsPerBlock];
  double sum = 0.0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) sum += partials[i];
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0) *out = sum;
}

// Block (32, 8): 32 adjacent columns (coalesced), 8 row-strided partial sums per column.
constexpr int kColumnsPerBlock = 32;
constexpr int kRowLanes = kThreads / kColumnsPerBlock;

__global__ void __launch_bounds__(kThreads)
    column_sums_kernel(const float* dy, int rows, int cols, float* db) {
  __shared__ float partial[kRowLanes][kColumnsPerBlock + 1];
  const int c = blockIdx.x * kColumnsPerBlock + threadIdx.x;
  float sum = 0.0f;
  if (c < cols) {
    for (int r = threadIdx.y; r < rows; r += kRowLanes) {
      sum += dy[static_cast<std::size_t>(r) * cols + c];
    }
  }
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float total = 0.0f;
    for (int k = 0; k < kRowLanes; ++k) total += partial[k][threadIdx.x];
    db[c] = total;
  }
}

}  // namespace

cudaError_t squared_distance(const float* a, const float* b, std::size_t n, double* partials,
                             double* out, const Launch& launch) {
  const bool vectorise = reinterpret_cast<std::uintptr_t>(a) % 16 == 0 &&
                         (b == nullptr || reinterpret_cast<std::uintptr_t>(b) % 16 == 0);
  const std::size_t n_vec = vectorise ? n / 4 : 0;
  const std::size_t tail = n - 4 * n_vec;
  const int cap = launch.max_blocks < kMaxPartials ? launch.max_blocks : kMaxPartials;
  // Always at least one block, so *out is written (0) even when n == 0.
  const int grid = grid_for(n_vec > tail ? n_vec : tail, cap);
  if (b != nullptr) {
    squared_kernel<true><<<grid, kThreads, 0, launch.stream>>>(a, b, n_vec, n, partials);
  } else {
    squared_kernel<false><<<grid, kThreads, 0, launch.stream>>>(a, b, n_vec, n, partials);
  }
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) return status;
  return sum_partials(partials, grid, out, launch);
}

cudaError_t sum_partials(const double* partials, int count, double* out, const Launch& launch) {
  sum_partials_kernel<<<1, kThreads, 0, launch.stream>>>(partials, count, out);
  return cudaGetLastError();
}

cudaError_t column_sums(const float* dy, int rows, int cols, float* db, const Launch& launch) {
  if (cols <= 0) return cudaSuccess;
  const dim3 block(kColumnsPerBlock, kRowLanes);
  const dim3 grid(static_cast<unsigned>((cols + kColumnsPerBlock - 1) / kColumnsPerBlock));
  column_sums_kernel<<<grid, block, 0, launch.stream>>>(dy, rows < 0 ? 0 : rows, cols, db);
  return cudaGetLastError();
}

}  // namespace sgp::kernels
