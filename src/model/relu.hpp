#pragma once
#include "layer.hpp"

namespace sgp::model {

// max(x, 0) in place. `fused`: the layer before already applied it in its forward pass (then
// only the backward pass is left here).
class Relu final : public Layer {
 public:
  Relu(compute::Backend& backend, Shape shape, bool fused);

  Shape output_shape() const override { return shape_; }
  bool in_place() const override { return true; }
  void forward(const LayerPass& pass) override;
  void backward(const LayerPass& pass) override;

 private:
  compute::Backend& backend_;
  Shape shape_;
  bool fused_;
};

}  // namespace sgp::model
