#pragma once
#include <cstdint>

#include "layer.hpp"
#include "sgp/compute/device_buffer.hpp"

namespace sgp::model {

// Max pooling over k x k windows (no padding). Keeps where each maximum came from (argmax, one
// index per output of the largest batch) for the backward pass.
class MaxPool2d final : public Layer {
 public:
  MaxPool2d(compute::Backend& backend, Shape input, const LayerSpec& spec, int max_batch);

  Shape output_shape() const override { return output_; }
  void forward(const LayerPass& pass) override;
  void backward(const LayerPass& pass) override;

 private:
  compute::Backend& backend_;
  Shape input_, output_;
  int kernel_, stride_;
  compute::DeviceBuffer<std::int32_t> argmax_;
};

}  // namespace sgp::model
