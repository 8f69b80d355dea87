#pragma once
// SGD with momentum, Nesterov and weight decay, as one fused backend operation per step.
#include <cstddef>

#include "sgp/compute/backend.hpp"
#include "sgp/compute/device_buffer.hpp"

namespace sgp::model {

struct SgdOptions {
  float momentum = 0.9f;
  float weight_decay = 1e-4f;
  bool nesterov = true;
};

class Sgd {
 public:
  Sgd(compute::Backend& backend, std::size_t parameter_count, SgdOptions options);

  // params -= lr * update(grads); the velocity (momentum buffer) starts at zero.
  void step(float* params, const float* grads, float lr);

  const SgdOptions& options() const { return options_; }
  compute::DeviceBuffer<float>& velocity() { return velocity_; }

 private:
  compute::Backend& backend_;
  SgdOptions options_;
  compute::DeviceBuffer<float> velocity_;
};

}  // namespace sgp::model
