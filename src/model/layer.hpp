#pragma once
// One layer of a Network (network.hpp). A layer owns no parameters: it reads its slice of the
// network's flat parameter buffer and writes the same slice of the gradient. Layers run through
// the compute backend, so the same code runs on the CPU and on CUDA. Activations are NHWC.
#include <cstddef>

#include "sgp/compute/backend.hpp"
#include "sgp/compute/window.hpp"
#include "sgp/model/model_spec.hpp"

namespace sgp::model {

// The buffers of one layer for one call (all in backend memory).
struct LayerPass {
  const float* params = nullptr;  // this layer's slice of the parameters
  // The layer computes with params * param_scale, never written out: push-sum keeps x = w * z
  // and the gradient is taken at z, so x / w goes into each GEMM's alpha and the bias add.
  float param_scale = 1.0f;
  float* grads = nullptr;        // this layer's slice of the gradient (backward only)
  const float* input = nullptr;  // [batch x input shape]
  float* output = nullptr;       // [batch x output shape]; == input for an in-place layer
  const float* d_output = nullptr;
  float* d_input = nullptr;    // null: no layer before needs the input gradient; for an in-place
                               // layer, == d_output
  float* workspace = nullptr;  // workspace_size(batch) floats
  // The workspace is this layer's own and still holds what its forward pass left there (networks
  // with gradients); otherwise it is shared by all layers and the backward pass starts afresh.
  bool workspace_kept = false;
  int batch = 0;
};

class Layer {
 public:
  virtual ~Layer() = default;
  Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  virtual Shape output_shape() const = 0;
  virtual std::size_t parameter_count() const { return 0; }
  // Initial parameters are uniform in +-1/sqrt(fan_in), weights and biases alike (PyTorch's
  // default for Linear and Conv2d).
  virtual int fan_in() const { return 1; }
  virtual std::size_t workspace_size(int /*batch*/) const { return 0; }
  // Output aliases the input, and the input gradient the output gradient (ReLU, Flatten).
  virtual bool in_place() const { return false; }
  // Asks this layer to apply the ReLU that follows it in its own forward pass (one pass over
  // the output instead of two); returns whether it will.
  virtual bool fuse_relu() { return false; }

  virtual void forward(const LayerPass& pass) = 0;
  virtual void backward(const LayerPass& pass) = 0;
};

// The window of a convolution or pooling layer over a batch of `input`-shaped images.
inline compute::Window window_over(Shape input, int batch, int kernel, int stride, int padding) {
  return {batch, input.height, input.width, input.channels, kernel, stride, padding};
}

}  // namespace sgp::model
