#include "sgp/model/network.hpp"

#include <algorithm>
#include <cmath>
#include <random>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "avg_pool2d.hpp"
#include "conv2d.hpp"
#include "flatten.hpp"
#include "linear.hpp"
#include "max_pool2d.hpp"
#include "relu.hpp"
#include "sgp/error.hpp"

namespace sgp::model {

Network::Network(compute::Backend& backend, const ModelSpec& spec, Shape input, int classes,
                 int max_batch, bool with_gradients)
    : backend_(backend), spec_(spec), classes_(classes), max_batch_(max_batch) {
  SGP_ENFORCE(max_batch >= 1, "max_batch must be >= 1, got {}", max_batch);
  SGP_ENFORCE(classes >= 1, "a classifier needs classes, got {}", classes);
  output_shapes(spec, input, classes);  // InputError naming the layer that does not fit
  std::size_t workspace = 0;
  Shape shape = input;
  for (const LayerSpec& layer : with_classifier(spec, classes)) {
    add_layer(layer, shape, with_gradients);
    shape = layers_.back()->output_shape();
    const std::size_t size = layers_.back()->workspace_size(max_batch);
    workspace_offsets_.push_back(with_gradients ? workspace : 0);
    workspace = with_gradients ? workspace + size : std::max(workspace, size);
  }
  workspace_ = compute::DeviceBuffer<float>(backend, workspace);
}

Network::~Network() = default;

void Network::add_layer(const LayerSpec& spec, Shape input, bool with_gradients) {
  const std::size_t i = layers_.size();
  std::unique_ptr<Layer> layer;
  switch (spec.kind) {
    case LayerKind::linear:
      layer = std::make_unique<Linear>(backend_, input, spec.size);
      break;
    case LayerKind::relu:
      layer = std::make_unique<Relu>(backend_, input, i > 0 && layers_.back()->fuse_relu());
      break;
    case LayerKind::conv2d:
      layer = std::make_unique<Conv2d>(backend_, input, spec);
      break;
    case LayerKind::max_pool:
      layer = std::make_unique<MaxPool2d>(backend_, input, spec, max_batch_);
      break;
    case LayerKind::avg_pool:
      layer = std::make_unique<AvgPool2d>(backend_, input, spec);
      break;
    case LayerKind::flatten:
      layer = std::make_unique<Flatten>(input);
      break;
  }
  needs_input_gradient_.push_back(offsets_.back() > 0);
  offsets_.push_back(offsets_.back() + layer->parameter_count());
  if (layer->in_place()) {
    outputs_.push_back(i > 0 ? outputs_.back() : nullptr);
    deltas_.push_back(i > 0 ? deltas_.back() : nullptr);
  } else {
    const std::size_t size = static_cast<std::size_t>(max_batch_) * layer->output_shape().size();
    outputs_.push_back(buffers_.emplace_back(backend_, size).data());
    deltas_.push_back(with_gradients ? buffers_.emplace_back(backend_, size).data() : nullptr);
  }
  const Shape out = layer->output_shape();
  names_.push_back(
      fmt::format("{} {}x{}x{}", layer_name(spec), out.height, out.width, out.channels));
  layers_.push_back(std::move(layer));
}

std::string Network::describe() const {
  return fmt::format("{} ({}; {} parameters)", spec_.text, fmt::join(names_, " -> "),
                     parameter_count());
}

std::vector<float> Network::initial_parameters(std::uint64_t seed) const {
  std::vector<float> params(parameter_count());
  std::mt19937_64 rng(seed);
  // 24 random bits -> uniform in [0, 1): the same on every platform, unlike the distributions.
  auto uniform = [&rng] { return static_cast<float>(rng() >> 40) * (1.0f / 16777216.0f); };
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    const float bound = 1.0f / std::sqrt(static_cast<float>(layers_[l]->fan_in()));
    for (std::size_t i = offsets_[l]; i < offsets_[l + 1]; ++i) {
      params[i] = (2.0f * uniform() - 1.0f) * bound;
    }
  }
  return params;
}

float* Network::output_of(std::size_t i, const float* inputs) const {
  // Only Flatten can sit in place at the front (a leading ReLU is refused by the parser), and it
  // never writes: the caller's input stays untouched.
  return outputs_[i] ? outputs_[i] : const_cast<float*>(inputs);
}

void Network::check_batch(int batch) const {
  SGP_ENFORCE(batch >= 1 && batch <= max_batch_, "batch {} outside 1..{}", batch, max_batch_);
}

const float* Network::forward(const float* params, const float* inputs, int batch,
                              float param_scale) {
  check_batch(batch);
  SGP_ENFORCE(param_scale > 0.0f && std::isfinite(param_scale),
              "parameter scale must be positive and finite, got {}", param_scale);
  LayerPass pass;
  pass.batch = batch;
  pass.param_scale = param_scale;
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    pass.workspace = workspace_.data() + workspace_offsets_[l];
    pass.params = params + offsets_[l];
    pass.input = l ? output_of(l - 1, inputs) : inputs;
    pass.output = output_of(l, inputs);
    layers_[l]->forward(pass);
  }
  return output_of(layers_.size() - 1, inputs);
}

double Network::forward_backward(const float* params, const float* inputs,
                                 const std::int32_t* labels, int batch, float* grads,
                                 float param_scale) {
  queue_forward_backward(params, inputs, labels, batch, grads, param_scale);
  return backend_.queued_loss();
}

void Network::queue_forward_backward(const float* params, const float* inputs,
                                     const std::int32_t* labels, int batch, float* grads,
                                     float param_scale) {
  SGP_ENFORCE(deltas_.back() != nullptr, "forward_backward on a forward-only network");
  const float* logits = forward(params, inputs, batch, param_scale);
  backend_.queue_softmax_cross_entropy(logits, labels, batch, classes_, deltas_.back());
  LayerPass pass;
  pass.batch = batch;
  pass.param_scale = param_scale;
  pass.workspace_kept = true;  // forward_backward needs gradient buffers: workspaces are own
  for (std::size_t l = layers_.size(); l-- > 0;) {
    pass.workspace = workspace_.data() + workspace_offsets_[l];
    pass.params = params + offsets_[l];
    pass.grads = grads + offsets_[l];
    pass.input = l ? output_of(l - 1, inputs) : inputs;
    pass.output = output_of(l, inputs);
    pass.d_output = deltas_[l];
    pass.d_input = needs_input_gradient_[l] ? deltas_[l - 1] : nullptr;
    layers_[l]->backward(pass);
  }
}

}  // namespace sgp::model
