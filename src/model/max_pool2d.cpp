#include "max_pool2d.hpp"

namespace sgp::model {

MaxPool2d::MaxPool2d(compute::Backend& backend, Shape input, const LayerSpec& spec, int max_batch)
    : backend_(backend),
      input_(input),
      output_(model::output_shape(spec, input)),
      kernel_(spec.kernel),
      stride_(spec.stride),
      argmax_(backend, static_cast<std::size_t>(max_batch) * output_.size()) {}

void MaxPool2d::forward(const LayerPass& p) {
  backend_.max_pool_forward(p.input, window_over(input_, p.batch, kernel_, stride_, 0), p.output,
                            argmax_.data());
}

void MaxPool2d::backward(const LayerPass& p) {
  if (!p.d_input) return;
  backend_.max_pool_backward(p.d_output, argmax_.data(),
                             window_over(input_, p.batch, kernel_, stride_, 0), p.d_input);
}

}  // namespace sgp::model
