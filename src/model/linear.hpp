#pragma once
#include "layer.hpp"

namespace sgp::model {

// y = x W^T + b on the flattened input. Parameters: W [outputs x inputs] row-major, then b.
class Linear final : public Layer {
 public:
  Linear(compute::Backend& backend, Shape input, int outputs);

  Shape output_shape() const override { return {1, 1, outputs_}; }
  std::size_t parameter_count() const override;
  int fan_in() const override { return inputs_; }
  bool fuse_relu() override { return relu_ = true; }
  void forward(const LayerPass& pass) override;
  void backward(const LayerPass& pass) override;

 private:
  compute::Backend& backend_;
  int inputs_, outputs_;
  bool relu_ = false;
};

}  // namespace sgp::model
