#include "linear.hpp"

namespace sgp::model {

using compute::Transpose;

Linear::Linear(compute::Backend& backend, Shape input, int outputs)
    : backend_(backend), inputs_(static_cast<int>(input.size())), outputs_(outputs) {}

std::size_t Linear::parameter_count() const {
  return (static_cast<std::size_t>(inputs_) + 1) * outputs_;
}

void Linear::forward(const LayerPass& p) {
  const float* weights = p.params;
  const float* bias = p.params + static_cast<std::size_t>(inputs_) * outputs_;
  // output[B x out] = input[B x in] * W^T, then + b (and the fused ReLU)
  backend_.gemm(Transpose::no, Transpose::yes, p.batch, outputs_, inputs_, p.param_scale, p.input,
                inputs_, weights, inputs_, 0.0f, p.output, outputs_);
  backend_.bias_activation_forward(p.output, bias, p.batch, outputs_, relu_, p.param_scale);
}

void Linear::backward(const LayerPass& p) {
  const std::size_t weight_count = static_cast<std::size_t>(inputs_) * outputs_;
  // dW[out x in] = d_output^T[out x B] * input[B x in];  db = column sums of d_output
  backend_.gemm(Transpose::yes, Transpose::no, outputs_, inputs_, p.batch, 1.0f, p.d_output,
                outputs_, p.input, inputs_, 0.0f, p.grads, inputs_);
  backend_.bias_backward(p.d_output, p.batch, outputs_, p.grads + weight_count);
  if (p.d_input) {
    // d_input[B x in] = d_output[B x out] * W[out x in]
    backend_.gemm(Transpose::no, Transpose::no, p.batch, inputs_, outputs_, p.param_scale,
                  p.d_output, outputs_, p.params, inputs_, 0.0f, p.d_input, inputs_);
  }
}

}  // namespace sgp::model
