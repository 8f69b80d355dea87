#include "kernels/pooling.cuh"

#include "kernels/block_reduce.cuh"

namespace sgp::kernels {

namespace {

using compute::Window;

// Output element i = (position, c) of a pooling window: the index of the window's top-left
// input element and the step between its pixels (one pixel = channels floats).
struct PoolOutput {
  std::size_t corner;
  std::size_t row_step;  // one image row
};

__device__ __forceinline__ PoolOutput pool_output(const Window& w, std::size_t i) {
  const int ow = w.out_width(), oh = w.out_height();
  const std::size_t position = i / w.channels;
  const int c = static_cast<int>(i % w.channels);
  const int ox = static_cast<int>(position % ow), oy = static_cast<int>(position / ow % oh);
  const std::size_t b = position / ow / oh;
  const std::size_t pixel =
      (b * w.height + static_cast<std::size_t>(oy) * w.stride) * w.width + ox * w.stride;
  return {pixel * w.channels + c, static_cast<std::size_t>(w.width) * w.channels};
}

__global__ void __launch_bounds__(kThreads)
    max_pool_kernel(const float* x, Window w, float* y, std::int32_t* argmax, std::size_t total) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    const PoolOutput o = pool_output(w, i);
    std::size_t where = o.corner;
    float best = x[where];
    for (int ky = 0; ky < w.kernel; ++ky)
      for (int kx = 0; kx < w.kernel; ++kx) {
        const std::size_t at =
            o.corner + ky * o.row_step + static_cast<std::size_t>(kx) * w.channels;
        if (x[at] > best) {
          best = x[at];
          where = at;
        }
      }
    y[i] = best;
    argmax[i] = static_cast<std::int32_t>(where);
  }
}

__global__ void __launch_bounds__(kThreads)
    max_pool_backward_kernel(const float* dy, const std::int32_t* argmax, float* dx,
                             std::size_t total) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    atomicAdd(dx + argmax[i], dy[i]);
  }
}

__global__ void __launch_bounds__(kThreads)
    avg_pool_kernel(const float* x, Window w, float* y, float scale, std::size_t total) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    const PoolOutput o = pool_output(w, i);
    float sum = 0.0f;
    for (int ky = 0; ky < w.kernel; ++ky)
      for (int kx = 0; kx < w.kernel; ++kx) {
        sum += x[o.corner + ky * o.row_step + static_cast<std::size_t>(kx) * w.channels];
      }
    y[i] = sum * scale;
  }
}

// One thread per input element (b, iy, ix, c): the windows (oy, ox) containing it, ascending
// (the order in which the CPU reference adds them).
__global__ void __launch_bounds__(kThreads)
    avg_pool_backward_kernel(const float* dy, Window w, float* dx, float share, std::size_t total) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const int ow = w.out_width(), oh = w.out_height();
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    const int c = static_cast<int>(i % w.channels);
    const int ix = static_cast<int>(i / w.channels % w.width);
    const int iy = static_cast<int>(i / w.channels / w.width % w.height);
    const std::size_t b = i / w.channels / w.width / w.height;
    // Windows oy with oy * stride <= iy < oy * stride + kernel.
    const int oy_first = iy < w.kernel ? 0 : (iy - w.kernel) / w.stride + 1;
    const int ox_first = ix < w.kernel ? 0 : (ix - w.kernel) / w.stride + 1;
    float sum = 0.0f;
    for (int oy = oy_first; oy <= iy / w.stride && oy < oh; ++oy)
      for (int ox = ox_first; ox <= ix / w.stride && ox < ow; ++ox) {
        sum += dy[((b * oh + oy) * ow + ox) * w.channels + c] * share;
      }
    dx[i] = sum;
  }
}

}  // namespace

cudaError_t max_pool_forward(const float* x, const Window& w, float* y, std::int32_t* argmax,
                             const Launch& launch) {
  const std::size_t total = w.pooled_size();
  if (total == 0) return cudaSuccess;
  max_pool_kernel<<<grid_for(total, launch.max_blocks), kThreads, 0, launch.stream>>>(
      x, w, y, argmax, total);
  return cudaGetLastError();
}

cudaError_t max_pool_backward(const float* dy, const std::int32_t* argmax, const Window& w,
                              float* dx, const Launch& launch) {
  const cudaError_t zeroed = cudaMemsetAsync(dx, 0, w.input_size() * sizeof(float), launch.stream);
  if (zeroed != cudaSuccess) return zeroed;
  const std::size_t total = w.pooled_size();
  if (total == 0) return cudaSuccess;
  max_pool_backward_kernel<<<grid_for(total, launch.max_blocks), kThreads, 0, launch.stream>>>(
      dy, argmax, dx, total);
  return cudaGetLastError();
}

cudaError_t avg_pool_forward(const float* x, const Window& w, float* y, const Launch& launch) {
  const std::size_t total = w.pooled_size();
  if (total == 0) return cudaSuccess;
  const float scale = 1.0f / static_cast<float>(w.kernel * w.kernel);
  avg_pool_kernel<<<grid_for(total, launch.max_blocks), kThreads, 0, launch.stream>>>(x, w, y,
                                                                                      scale, total);
  return cudaGetLastError();
}

cudaError_t avg_pool_backward(const float* dy, const Window& w, float* dx, const Launch& launch) {
  const std::size_t total = w.input_size();
  if (total == 0) return cudaSuccess;
  const float share = 1.0f / static_cast<float>(w.kernel * w.kernel);
  avg_pool_backward_kernel<<<grid_for(total, launch.max_blocks), kThreads, 0, launch.stream>>>(
      dy, w, dx, share, total);
  return cudaGetLastError();
}

}  // namespace sgp::kernels
