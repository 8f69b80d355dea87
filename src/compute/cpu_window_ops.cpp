// CpuBackend's convolution and pooling operations over NHWC image batches (window.hpp), and the
// stand-alone ReLU. The reference that the CUDA kernels (kernels/im2col.cu, kernels/pooling.cu)
// are tested against. In NHWC the k pixels of one kernel row are k * channels contiguous floats,
// so im2col copies whole kernel rows where they lie inside the image.
#include <algorithm>

#include "pool_check.hpp"
#include "sgp/compute/cpu_backend.hpp"

namespace sgp::compute {

namespace {

// Copies a kernel row (k * channels floats: 5 or 30 in LeNet) with a plain loop that the compiler
// vectorises; GCC's "no-tree-loop-distribute-patterns" keeps it from turning the loop back into a
// libc memcpy call, which costs more than such a copy.
__attribute__((optimize("no-tree-loop-distribute-patterns"))) void copy_row(const float* from,
                                                                            std::size_t n,
                                                                            float* to) {
  for (std::size_t i = 0; i < n; ++i) to[i] = from[i];
}

// Calls visit(patch_row, inside, row_pixel, ix0) for every kernel row of every window position,
// in the order of im2col's output: patch_row is the index in cols of the row's kernel * channels
// entries; inside is false when the row lies in the vertical padding; otherwise row_pixel is the
// index of pixel (b, iy, 0) and ix0 the column of the row's first pixel (maybe in the padding).
template <class Visit>
void for_each_kernel_row(const Window& w, Visit&& visit) {
  const int oh = w.out_height(), ow = w.out_width();
  const std::size_t row = static_cast<std::size_t>(w.kernel) * w.channels;
  std::size_t position = 0;
  for (int b = 0; b < w.batch; ++b) {
    for (int oy = 0; oy < oh; ++oy) {
      for (int ox = 0; ox < ow; ++ox, ++position) {
        const int ix0 = ox * w.stride - w.padding;
        for (int ky = 0; ky < w.kernel; ++ky) {
          const int iy = oy * w.stride - w.padding + ky;
          const std::size_t patch_row = position * w.patch() + ky * row;
          const bool inside = iy >= 0 && iy < w.height;
          const std::size_t pixel =
              inside ? (static_cast<std::size_t>(b) * w.height + iy) * w.width : 0;
          visit(patch_row, inside, pixel, ix0);
        }
      }
    }
  }
}

// Calls visit(position, pixel, first) for every input pixel of every pooling window (padding 0),
// window by window in row-major order: position numbers the window over the batch, pixel is the
// input pixel's index, first marks the window's first pixel.
template <class Visit>
void for_each_pool_pixel(const Window& w, Visit&& visit) {
  const int oh = w.out_height(), ow = w.out_width();
  std::size_t position = 0;
  for (int b = 0; b < w.batch; ++b)
    for (int oy = 0; oy < oh; ++oy)
      for (int ox = 0; ox < ow; ++ox, ++position)
        for (int ky = 0; ky < w.kernel; ++ky) {
          const std::size_t row =
              (static_cast<std::size_t>(b) * w.height + oy * w.stride + ky) * w.width;
          for (int kx = 0; kx < w.kernel; ++kx) {
            visit(position, row + ox * w.stride + kx, ky == 0 && kx == 0);
          }
        }
}

}  // namespace

void CpuBackend::relu_forward(float* x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) x[i] = std::max(x[i], 0.0f);
}

void CpuBackend::im2col(const float* x, const Window& w, float* cols) {
  const int c = w.channels, k = w.kernel;
  for_each_kernel_row(w, [&](std::size_t patch_row, bool inside, std::size_t pixel, int ix0) {
    float* out = cols + patch_row;
    if (!inside) {
      std::fill(out, out + static_cast<std::size_t>(k) * c, 0.0f);
    } else if (ix0 >= 0 && ix0 + k <= w.width) {  // the whole kernel row inside: one copy
      copy_row(x + (pixel + ix0) * c, static_cast<std::size_t>(k) * c, out);
    } else {
      for (int kx = 0; kx < k; ++kx, out += c) {
        const int ix = ix0 + kx;
        if (ix >= 0 && ix < w.width) {
          copy_row(x + (pixel + ix) * c, c, out);
        } else {
          std::fill(out, out + c, 0.0f);
        }
      }
    }
  });
}

void CpuBackend::col2im(const float* cols, const Window& w, float* dx) {
  std::fill(dx, dx + w.input_size(), 0.0f);
  const int c = w.channels, k = w.kernel;
  for_each_kernel_row(w, [&](std::size_t patch_row, bool inside, std::size_t pixel, int ix0) {
    if (!inside) return;
    const float* in = cols + patch_row;
    for (int kx = 0; kx < k; ++kx, in += c) {
      const int ix = ix0 + kx;
      if (ix < 0 || ix >= w.width) continue;
      float* out = dx + (pixel + ix) * c;
      for (int ch = 0; ch < c; ++ch) out[ch] += in[ch];
    }
  });
}

void CpuBackend::max_pool_forward(const float* x, const Window& w, float* y, std::int32_t* argmax) {
  check_pool(w);
  const int c = w.channels;
  for_each_pool_pixel(w, [&](std::size_t position, std::size_t pixel, bool first) {
    const float* __restrict v = x + pixel * c;
    float* __restrict best = y + position * c;
    std::int32_t* __restrict where = argmax + position * c;
    const auto index = static_cast<std::int32_t>(pixel * c);
    if (first) {
      for (int ch = 0; ch < c; ++ch) {
        best[ch] = v[ch];
        where[ch] = index + ch;
      }
      return;
    }
    for (int ch = 0; ch < c; ++ch) {  // branch-free, so that it vectorises
      const bool better = v[ch] > best[ch];
      best[ch] = better ? v[ch] : best[ch];
      where[ch] = better ? index + ch : where[ch];
    }
  });
}

void CpuBackend::max_pool_backward(const float* dy, const std::int32_t* argmax, const Window& w,
                                   float* dx) {
  check_pool(w);
  std::fill(dx, dx + w.input_size(), 0.0f);
  const std::size_t n = w.pooled_size();
  for (std::size_t o = 0; o < n; ++o) dx[argmax[o]] += dy[o];
}

void CpuBackend::avg_pool_forward(const float* x, const Window& w, float* y) {
  check_pool(w);
  const int c = w.channels;
  for_each_pool_pixel(w, [&](std::size_t position, std::size_t pixel, bool first) {
    const float* v = x + pixel * c;
    float* sum = y + position * c;
    for (int ch = 0; ch < c; ++ch) sum[ch] = first ? v[ch] : sum[ch] + v[ch];
  });
  scale(y, w.pooled_size(), 1.0f / static_cast<float>(w.kernel * w.kernel));
}

void CpuBackend::avg_pool_backward(const float* dy, const Window& w, float* dx) {
  check_pool(w);
  std::fill(dx, dx + w.input_size(), 0.0f);
  const int c = w.channels;
  const float share = 1.0f / static_cast<float>(w.kernel * w.kernel);
  for_each_pool_pixel(w, [&](std::size_t position, std::size_t pixel, bool) {
    const float* g = dy + position * c;
    float* d = dx + pixel * c;
    for (int ch = 0; ch < c; ++ch) d[ch] += g[ch] * share;
  });
}

}  // namespace sgp::compute
