#include "sgp/model/mlp.hpp"

#include <cmath>
#include <random>

#include "sgp/error.hpp"

namespace sgp::model {

std::size_t parameter_count(const std::vector<int>& widths) {
  std::size_t count = 0;
  for (std::size_t l = 0; l + 1 < widths.size(); ++l) {
    count += static_cast<std::size_t>(widths[l]) * widths[l + 1] + widths[l + 1];
  }
  return count;
}

using compute::Transpose;

Mlp::Mlp(compute::Backend& backend, std::vector<int> widths, int max_batch)
    : backend_(backend), widths_(std::move(widths)), max_batch_(max_batch) {
  SGP_ENFORCE(widths_.size() >= 2, "an MLP needs an input and an output width");
  SGP_ENFORCE(max_batch >= 1, "max_batch must be >= 1, got {}", max_batch);
  for (std::size_t l = 0; l + 1 < widths_.size(); ++l) {
    LayerView layer;
    layer.in = widths_[l];
    layer.out = widths_[l + 1];
    SGP_ENFORCE(layer.in >= 1 && layer.out >= 1, "layer {} has width {} -> {}", l, layer.in,
                layer.out);
    layer.weight_offset = parameter_count_;
    layer.bias_offset = parameter_count_ + static_cast<std::size_t>(layer.in) * layer.out;
    parameter_count_ = layer.bias_offset + layer.out;
    layers_.push_back(layer);
    const std::size_t outputs = static_cast<std::size_t>(max_batch) * layer.out;
    activations_.emplace_back(backend, outputs);
    deltas_.emplace_back(backend, outputs);
  }
}

std::vector<float> Mlp::initial_parameters(std::uint64_t seed) const {
  std::vector<float> params(parameter_count_);
  std::mt19937_64 rng(seed);
  // 24 random bits -> uniform in [0, 1): the same on every platform, unlike the distributions.
  auto uniform = [&rng] { return static_cast<float>(rng() >> 40) * (1.0f / 16777216.0f); };
  for (const LayerView& layer : layers_) {
    const float bound = 1.0f / std::sqrt(static_cast<float>(layer.in));
    const std::size_t count = static_cast<std::size_t>(layer.in) * layer.out + layer.out;
    for (std::size_t i = 0; i < count; ++i) {
      params[layer.weight_offset + i] = (2.0f * uniform() - 1.0f) * bound;
    }
  }
  return params;
}

void Mlp::check_batch(int batch) const {
  SGP_ENFORCE(batch >= 1 && batch <= max_batch_, "batch {} outside 1..{}", batch, max_batch_);
}

const float* Mlp::forward(const float* params, const float* inputs, int batch) {
  check_batch(batch);
  const float* input = inputs;
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    const LayerView& layer = layers_[l];
    float* output = activations_[l].data();
    // output[B x out] = input[B x in] * W^T
    backend_.gemm(Transpose::no, Transpose::yes, batch, layer.out, layer.in, 1.0f, input, layer.in,
                  params + layer.weight_offset, layer.in, 0.0f, output, layer.out);
    const bool hidden = l + 1 < layers_.size();
    backend_.bias_activation_forward(output, params + layer.bias_offset, batch, layer.out, hidden);
    input = output;
  }
  return activations_.back().data();
}

double Mlp::forward_backward(const float* params, const float* inputs, const std::int32_t* labels,
                             int batch, float* grads) {
  const float* logits = forward(params, inputs, batch);
  const double loss =
      backend_.softmax_cross_entropy(logits, labels, batch, num_classes(), deltas_.back().data());
  for (std::size_t l = layers_.size(); l-- > 0;) {
    const LayerView& layer = layers_[l];
    const float* delta = deltas_[l].data();
    const float* input = l == 0 ? inputs : activations_[l - 1].data();
    // dW[out x in] = delta^T[out x B] * input[B x in];  db = column sums of delta
    backend_.gemm(Transpose::yes, Transpose::no, layer.out, layer.in, batch, 1.0f, delta, layer.out,
                  input, layer.in, 0.0f, grads + layer.weight_offset, layer.in);
    backend_.bias_backward(delta, batch, layer.out, grads + layer.bias_offset);
    if (l > 0) {
      // d input[B x in] = delta[B x out] * W[out x in], then through the ReLU of layer l-1.
      float* previous = deltas_[l - 1].data();
      backend_.gemm(Transpose::no, Transpose::no, batch, layer.in, layer.out, 1.0f, delta,
                    layer.out, params + layer.weight_offset, layer.in, 0.0f, previous, layer.in);
      backend_.relu_backward(previous, activations_[l - 1].data(),
                             static_cast<std::size_t>(batch) * layer.in);
    }
  }
  return loss;
}

}  // namespace sgp::model
