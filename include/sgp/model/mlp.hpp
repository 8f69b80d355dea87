#pragma once
// A multi-layer perceptron: Linear -> ReLU -> ... -> Linear, softmax cross-entropy loss.
//
// The MLP owns its architecture and activation workspace, never its parameters: every call takes
// a flat parameter buffer (one contiguous float array; per-layer views via layers()), so the same
// network computes gradients at the de-biased push-sum parameters z = x / w, or at anything else.
// Layout per layer l: weight [out_l x in_l] row-major, then bias [out_l].
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sgp/compute/backend.hpp"
#include "sgp/compute/device_buffer.hpp"

namespace sgp::model {

struct LayerView {
  int in = 0, out = 0;
  std::size_t weight_offset = 0;  // into the flat parameter buffer
  std::size_t bias_offset = 0;
};

// Parameters of an MLP with these widths (input, hidden..., classes): weights and biases.
std::size_t parameter_count(const std::vector<int>& widths);

class Mlp {
 public:
  // widths: input, hidden..., classes (at least two entries); max_batch: largest batch size.
  Mlp(compute::Backend& backend, std::vector<int> widths, int max_batch);

  const std::vector<int>& widths() const { return widths_; }
  const std::vector<LayerView>& layers() const { return layers_; }
  std::size_t parameter_count() const { return parameter_count_; }
  int max_batch() const { return max_batch_; }
  int num_classes() const { return widths_.back(); }

  // Host copy of the initial parameters: PyTorch's default nn.Linear initialisation
  // (uniform in +-1/sqrt(in) for weights and biases), from a seeded generator that gives the same
  // values on every platform and process.
  std::vector<float> initial_parameters(std::uint64_t seed) const;

  // Forward pass; returns the logits [batch x classes] in backend memory (valid until the next
  // call). inputs: [batch x widths[0]] in backend memory.
  const float* forward(const float* params, const float* inputs, int batch);

  // Forward and backward; writes d(mean loss)/d(params) into grads (same layout as params) and
  // returns the mean loss over the batch.
  double forward_backward(const float* params, const float* inputs, const std::int32_t* labels,
                          int batch, float* grads);

 private:
  void check_batch(int batch) const;

  compute::Backend& backend_;
  std::vector<int> widths_;
  std::vector<LayerView> layers_;
  std::size_t parameter_count_ = 0;
  int max_batch_;
  std::vector<compute::DeviceBuffer<float>> activations_;  // output of each layer
  std::vector<compute::DeviceBuffer<float>> deltas_;       // d loss / d layer output
};

}  // namespace sgp::model
