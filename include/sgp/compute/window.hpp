#pragma once
// The geometry of a square window sliding over a batch of images (convolution, pooling).
// Images are NHWC ("channels last"): element (b, y, x, c) of a batch is at
// ((b * height + y) * width + x) * channels + c, so that one pixel's channels are contiguous and
// an image batch of one channel (Fashion-MNIST) is the same memory as [batch x pixels].
// Plain data, usable in CUDA kernels too.
#include <cstddef>

#ifdef __CUDACC__
#define SGP_HOST_DEVICE __host__ __device__
#else
#define SGP_HOST_DEVICE
#endif

namespace sgp::compute {

struct Window {
  int batch = 1, height = 1, width = 1, channels = 1;  // the input images
  int kernel = 1, stride = 1, padding = 0;             // padding: zeros on every side

  SGP_HOST_DEVICE int out_height() const { return (height + 2 * padding - kernel) / stride + 1; }
  SGP_HOST_DEVICE int out_width() const { return (width + 2 * padding - kernel) / stride + 1; }
  // Window positions over the whole batch (rows of im2col's matrix).
  SGP_HOST_DEVICE std::size_t positions() const {
    return static_cast<std::size_t>(batch) * out_height() * out_width();
  }
  // Entries of one window: kernel * kernel * channels (columns of im2col's matrix).
  SGP_HOST_DEVICE int patch() const { return kernel * kernel * channels; }
  SGP_HOST_DEVICE std::size_t input_size() const {
    return static_cast<std::size_t>(batch) * height * width * channels;
  }
  // Elements of a pooled output: one per position and channel.
  SGP_HOST_DEVICE std::size_t pooled_size() const { return positions() * channels; }
};

}  // namespace sgp::compute
