#pragma once
#include "layer.hpp"

namespace sgp::model {

// 2-d convolution by im2col + one GEMM per batch. With NHWC images the im2col matrix is
// [positions x patch] (one row per output pixel of the batch) and the output
// [positions x channels] = cols * W^T is already NHWC, so the bias and its gradient are the
// Linear layer's row operations. Parameters: W [channels x (k, k, input channels)], then b.
// The im2col matrix lives in the workspace: the layer's own in a network with gradients (the
// backward pass reuses the forward's), one shared by all layers in a forward-only one.
class Conv2d final : public Layer {
 public:
  Conv2d(compute::Backend& backend, Shape input, const LayerSpec& spec);

  Shape output_shape() const override { return output_; }
  std::size_t parameter_count() const override;
  int fan_in() const override { return patch_; }
  std::size_t workspace_size(int batch) const override;
  bool fuse_relu() override { return relu_ = true; }
  void forward(const LayerPass& pass) override;
  void backward(const LayerPass& pass) override;

 private:
  compute::Window window(int batch) const;

  compute::Backend& backend_;
  Shape input_, output_;
  int kernel_, stride_, padding_;
  int patch_;  // kernel * kernel * input channels
  bool relu_ = false;
};

}  // namespace sgp::model
