#pragma once
// A multi-layer perceptron: Linear -> ReLU -> ... -> Linear, softmax cross-entropy loss. A view
// of the Network of model "mlp:<hidden widths>" by its widths, with per-layer views of the flat
// parameter buffer (layers()).
//
// The MLP owns its architecture and activation workspace, never its parameters: every call takes
// a flat parameter buffer (one contiguous float array), so the same network computes gradients at
// the de-biased push-sum parameters z = x / w, or at anything else.
// Layout per layer l: weight [out_l x in_l] row-major, then bias [out_l].
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sgp/compute/backend.hpp"
#include "sgp/model/network.hpp"

namespace sgp::model {

struct LayerView {
  int in = 0, out = 0;
  std::size_t weight_offset = 0;  // into the flat parameter buffer
  std::size_t bias_offset = 0;
};

class Mlp {
 public:
  // widths: input, hidden..., classes (at least two entries); max_batch: largest batch size.
  Mlp(compute::Backend& backend, std::vector<int> widths, int max_batch);

  const std::vector<int>& widths() const { return widths_; }
  const std::vector<LayerView>& layers() const { return layers_; }
  std::size_t parameter_count() const { return network_.parameter_count(); }
  int max_batch() const { return network_.max_batch(); }
  int num_classes() const { return widths_.back(); }

  // Host copy of the initial parameters: PyTorch's default nn.Linear initialisation
  // (uniform in +-1/sqrt(in) for weights and biases), from a seeded generator that gives the same
  // values on every platform and process.
  std::vector<float> initial_parameters(std::uint64_t seed) const {
    return network_.initial_parameters(seed);
  }

  // Forward pass; returns the logits [batch x classes] in backend memory (valid until the next
  // call). inputs: [batch x widths[0]] in backend memory.
  const float* forward(const float* params, const float* inputs, int batch) {
    return network_.forward(params, inputs, batch);
  }

  // Forward and backward; writes d(mean loss)/d(params) into grads (same layout as params) and
  // returns the mean loss over the batch.
  double forward_backward(const float* params, const float* inputs, const std::int32_t* labels,
                          int batch, float* grads) {
    return network_.forward_backward(params, inputs, labels, batch, grads);
  }

 private:
  std::vector<int> widths_;
  std::vector<LayerView> layers_;
  Network network_;
};

}  // namespace sgp::model
