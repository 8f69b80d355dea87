#include "kernels/im2col.cuh"

#include "kernels/block_reduce.cuh"

namespace sgp::kernels {

namespace {

using compute::Window;

// One thread per cols entry (position, ky, kx, c): consecutive threads read consecutive channels.
__global__ void __launch_bounds__(kThreads)
    im2col_kernel(const float* x, Window w, float* cols, std::size_t total) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const int ow = w.out_width(), oh = w.out_height(), patch = w.patch();
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    const std::size_t position = i / patch;
    const int entry = static_cast<int>(i % patch);
    const int c = entry % w.channels, kx = entry / w.channels % w.kernel,
              ky = entry / w.channels / w.kernel;
    const int ox = static_cast<int>(position % ow), oy = static_cast<int>(position / ow % oh);
    const std::size_t b = position / ow / oh;
    const int iy = oy * w.stride - w.padding + ky, ix = ox * w.stride - w.padding + kx;
    const bool inside = iy >= 0 && iy < w.height && ix >= 0 && ix < w.width;
    cols[i] = inside ? x[((b * w.height + iy) * w.width + ix) * w.channels + c] : 0.0f;
  }
}

// One thread per input element (b, iy, ix, c): sums, in the order ky then kx, the cols entries
// of every window position whose kernel covers (iy, ix).
__global__ void __launch_bounds__(kThreads)
    col2im_kernel(const float* cols, Window w, float* dx, std::size_t total) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const int ow = w.out_width(), oh = w.out_height(), patch = w.patch();
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    const int c = static_cast<int>(i % w.channels);
    const int ix = static_cast<int>(i / w.channels % w.width) + w.padding;
    const int iy = static_cast<int>(i / w.channels / w.width % w.height) + w.padding;
    const std::size_t b = i / w.channels / w.width / w.height;
    float sum = 0.0f;
    for (int ky = 0; ky < w.kernel; ++ky) {
      const int dy = iy - ky;
      if (dy < 0 || dy % w.stride != 0 || dy / w.stride >= oh) continue;
      for (int kx = 0; kx < w.kernel; ++kx) {
        const int dxp = ix - kx;
        if (dxp < 0 || dxp % w.stride != 0 || dxp / w.stride >= ow) continue;
        const std::size_t position = (b * oh + dy / w.stride) * ow + dxp / w.stride;
        sum += cols[position * patch + (ky * w.kernel + kx) * w.channels + c];
      }
    }
    dx[i] = sum;
  }
}

}  // namespace

cudaError_t im2col(const float* x, const Window& w, float* cols, const Launch& launch) {
  const std::size_t total = w.positions() * w.patch();
  if (total == 0) return cudaSuccess;
  im2col_kernel<<<grid_for(total, launch.max_blocks), kThreads, 0, launch.stream>>>(x, w, cols,
                                                                                    total);
  return cudaGetLastError();
}

cudaError_t col2im(const float* cols, const Window& w, float* dx, const Launch& launch) {
  const std::size_t total = w.input_size();
  if (total == 0) return cudaSuccess;
  col2im_kernel<<<grid_for(total, launch.max_blocks), kThreads, 0, launch.stream>>>(cols, w, dx,
                                                                                    total);
  return cudaGetLastError();
}

}  // namespace sgp::kernels
