#pragma once
#include "layer.hpp"

namespace sgp::model {

// (H, W, C) -> (1, 1, H*W*C). NHWC batches are already laid out that way: nothing moves.
class Flatten final : public Layer {
 public:
  explicit Flatten(Shape input) : size_(static_cast<int>(input.size())) {}

  Shape output_shape() const override { return {1, 1, size_}; }
  bool in_place() const override { return true; }
  void forward(const LayerPass&) override {}
  void backward(const LayerPass&) override {}

 private:
  int size_;
};

}  // namespace sgp::model
