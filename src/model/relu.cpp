#include "relu.hpp"

namespace sgp::model {

Relu::Relu(compute::Backend& backend, Shape shape, bool fused)
    : backend_(backend), shape_(shape), fused_(fused) {}

void Relu::forward(const LayerPass& p) {
  if (!fused_) backend_.relu_forward(p.output, static_cast<std::size_t>(p.batch) * shape_.size());
}

void Relu::backward(const LayerPass& p) {
  // In place: d_input == d_output; the output (> 0 where the input was) picks what passes.
  if (p.d_input) {
    backend_.relu_backward(p.d_input, p.output, static_cast<std::size_t>(p.batch) * shape_.size());
  }
}

}  // namespace sgp::model
