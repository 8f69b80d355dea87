#pragma once
// A feed-forward network built from a layer list (model_spec.hpp) plus its classifier, trained
// with softmax cross-entropy.
//
// Like every model here it owns its architecture and activation workspace, never its parameters:
// every call takes one flat parameter buffer (each layer reads its own slice, in layer order:
// weights then biases), so the push-sum engine, the optimizer and the checkpoints see one vector,
// whatever the model. Inputs and activations are NHWC image batches (compute/window.hpp).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sgp/compute/backend.hpp"
#include "sgp/compute/device_buffer.hpp"
#include "sgp/model/model_spec.hpp"

namespace sgp::model {

class Layer;

class Network {
 public:
  // input: the shape of one sample; classes: outputs of the classifier; max_batch: the largest
  // batch. with_gradients = false builds a forward-only network (no gradient buffers), e.g. for
  // evaluation. InputError when a layer does not fit its input.
  Network(compute::Backend& backend, const ModelSpec& spec, Shape input, int classes, int max_batch,
          bool with_gradients = true);
  ~Network();
  Network(const Network&) = delete;
  Network& operator=(const Network&) = delete;

  std::size_t parameter_count() const { return offsets_.back(); }
  int num_classes() const { return classes_; }
  int max_batch() const { return max_batch_; }
  // Where layer i's slice starts in the flat buffer (i = layer count: the total).
  std::size_t parameter_offset(std::size_t layer) const { return offsets_.at(layer); }
  // One line for logs: the layers with their output shapes and the parameter count.
  std::string describe() const;

  // Host copy of the initial parameters: PyTorch's default initialisation of Linear and Conv2d
  // (uniform in +-1/sqrt(fan-in) for weights and biases), layer by layer from one seeded
  // generator that gives the same values on every platform and process.
  std::vector<float> initial_parameters(std::uint64_t seed) const;

  // Forward pass; returns the logits [batch x classes] in backend memory (valid until the next
  // call). inputs: [batch x input size] in backend memory. Every pass computes with
  // params * param_scale without writing it out (push-sum's z = x / w: param_scale = 1 / w).
  const float* forward(const float* params, const float* inputs, int batch,
                       float param_scale = 1.0f);

  // Forward and backward; writes d(mean loss)/d(params) into grads (same layout as params) and
  // returns the mean loss over the batch.
  double forward_backward(const float* params, const float* inputs, const std::int32_t* labels,
                          int batch, float* grads, float param_scale = 1.0f);
  // The same, enqueued only: the loss is the backend's queued_loss(), read once the whole step is
  // queued (a GPU then runs the whole step without waiting for the host in between).
  void queue_forward_backward(const float* params, const float* inputs, const std::int32_t* labels,
                              int batch, float* grads, float param_scale = 1.0f);

 private:
  void add_layer(const LayerSpec& spec, Shape input, bool with_gradients);
  // Layer i's output buffer; an in-place layer at the front of the network aliases the input.
  float* output_of(std::size_t i, const float* inputs) const;
  void check_batch(int batch) const;

  compute::Backend& backend_;
  ModelSpec spec_;
  int classes_, max_batch_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<std::string> names_;
  std::vector<std::size_t> offsets_ = {0};
  std::vector<float*> outputs_, deltas_;    // per layer; null: the network input
  std::vector<bool> needs_input_gradient_;  // some layer before has parameters
  // Where each layer's workspace starts: its own slice with gradients (kept from the forward
  // pass for the backward one), all 0 (one shared workspace) without.
  std::vector<std::size_t> workspace_offsets_;
  std::vector<compute::DeviceBuffer<float>> buffers_;
  compute::DeviceBuffer<float> workspace_;
};

}  // namespace sgp::model
