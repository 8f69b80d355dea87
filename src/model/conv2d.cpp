#include "conv2d.hpp"

namespace sgp::model {

using compute::Transpose;

Conv2d::Conv2d(compute::Backend& backend, Shape input, const LayerSpec& spec)
    : backend_(backend),
      input_(input),
      output_(model::output_shape(spec, input)),
      kernel_(spec.kernel),
      stride_(spec.stride),
      padding_(spec.padding),
      patch_(spec.kernel * spec.kernel * input.channels) {}

std::size_t Conv2d::parameter_count() const {
  return (static_cast<std::size_t>(patch_) + 1) * output_.channels;
}

compute::Window Conv2d::window(int batch) const {
  return window_over(input_, batch, kernel_, stride_, padding_);
}

std::size_t Conv2d::workspace_size(int batch) const { return window(batch).positions() * patch_; }

void Conv2d::forward(const LayerPass& p) {
  const compute::Window w = window(p.batch);
  const int rows = static_cast<int>(w.positions()), channels = output_.channels;
  backend_.im2col(p.input, w, p.workspace);
  // output[rows x C] = cols[rows x patch] * W^T, then + b (and the fused ReLU)
  backend_.gemm(Transpose::no, Transpose::yes, rows, channels, patch_, p.param_scale, p.workspace,
                patch_, p.params, patch_, 0.0f, p.output, channels);
  backend_.bias_activation_forward(p.output, p.params + static_cast<std::size_t>(patch_) * channels,
                                   rows, channels, relu_, p.param_scale);
}

void Conv2d::backward(const LayerPass& p) {
  const compute::Window w = window(p.batch);
  const int rows = static_cast<int>(w.positions()), channels = output_.channels;
  if (!p.workspace_kept) backend_.im2col(p.input, w, p.workspace);
  // dW[C x patch] = d_output^T[C x rows] * cols[rows x patch];  db = column sums of d_output
  backend_.gemm(Transpose::yes, Transpose::no, channels, patch_, rows, 1.0f, p.d_output, channels,
                p.workspace, patch_, 0.0f, p.grads, patch_);
  backend_.bias_backward(p.d_output, rows, channels,
                         p.grads + static_cast<std::size_t>(patch_) * channels);
  if (p.d_input) {
    // d cols[rows x patch] = d_output[rows x C] * W[C x patch], then back onto the image.
    backend_.gemm(Transpose::no, Transpose::no, rows, patch_, channels, p.param_scale, p.d_output,
                  channels, p.params, patch_, 0.0f, p.workspace, patch_);
    backend_.col2im(p.workspace, w, p.d_input);
  }
}

}  // namespace sgp::model
