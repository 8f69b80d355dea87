#pragma once
#include "layer.hpp"

namespace sgp::model {

// Average pooling over k x k windows (no padding).
class AvgPool2d final : public Layer {
 public:
  AvgPool2d(compute::Backend& backend, Shape input, const LayerSpec& spec);

  Shape output_shape() const override { return output_; }
  void forward(const LayerPass& pass) override;
  void backward(const LayerPass& pass) override;

 private:
  compute::Window window(int batch) const {
    return window_over(input_, batch, kernel_, stride_, 0);
  }

  compute::Backend& backend_;
  Shape input_, output_;
  int kernel_, stride_;
};

}  // namespace sgp::model
