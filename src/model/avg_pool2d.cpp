#include "avg_pool2d.hpp"

namespace sgp::model {

AvgPool2d::AvgPool2d(compute::Backend& backend, Shape input, const LayerSpec& spec)
    : backend_(backend),
      input_(input),
      output_(model::output_shape(spec, input)),
      kernel_(spec.kernel),
      stride_(spec.stride) {}

void AvgPool2d::forward(const LayerPass& p) {
  backend_.avg_pool_forward(p.input, window(p.batch), p.output);
}

void AvgPool2d::backward(const LayerPass& p) {
  if (p.d_input) backend_.avg_pool_backward(p.d_output, window(p.batch), p.d_input);
}

}  // namespace sgp::model
