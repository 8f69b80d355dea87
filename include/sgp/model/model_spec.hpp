#pragma once
// What --model names: a list of layers, parsed from one string, and everything that can be known
// about it without a backend (shapes, parameter count). The network (network.hpp) appends the
// classifier: a Linear layer from the last layer's output to the data set's classes.
//
//   mlp:W1,W2,...   Linear(W1), ReLU, Linear(W2), ReLU, ...        e.g. mlp:512,512 (W1)
//   lenet           layers:conv6k5p2,relu,maxpool2,conv16k5,relu,maxpool2,flatten,
//                          linear120,relu,linear84,relu            (LeNet-5 with ReLU, max pooling)
//   lenet-wide      the same with conv16, conv32 and linear128 (more accurate, ~3x the compute)
//   layers:L1,L2,...  any list of
//     linearN         fully connected, N outputs (its input is flattened implicitly)
//     relu            max(x, 0)
//     convCkK[sS][pP] 2-d convolution, C output channels, K x K kernel, stride S (1), zero padding
//     P (0) maxpoolK[sS]    max pooling over K x K windows, stride S (default K) avgpoolK[sS]
//     average pooling, the same flatten         (H, W, C) -> (1, 1, H*W*C); the memory does not
//     move (images are NHWC)
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace sgp::model {

// The shape of one sample: height x width x channels, stored NHWC (channels fastest).
struct Shape {
  int height = 1, width = 1, channels = 1;
  std::size_t size() const { return static_cast<std::size_t>(height) * width * channels; }
  bool operator==(const Shape&) const = default;
};

enum class LayerKind { linear, relu, conv2d, max_pool, avg_pool, flatten };

struct LayerSpec {
  LayerKind kind = LayerKind::relu;
  int size = 0;  // linear: outputs; conv2d: output channels
  int kernel = 0, stride = 1, padding = 0;
  bool operator==(const LayerSpec&) const = default;
};

struct ModelSpec {
  std::string text;               // as given, e.g. "lenet"
  std::vector<LayerSpec> layers;  // without the classifier
};

// Parses a --model value; InputError "'TEXT' is not a model: WHY" (the caller adds where).
ModelSpec parse_model_spec(std::string_view text);
// The MLP with these hidden widths ("mlp:W1,...").
ModelSpec mlp_spec(const std::vector<int>& hidden);

// The layer as written in a layers: list, e.g. "conv6k5p2", "maxpool2".
std::string layer_name(const LayerSpec& layer);
// The output shape of `layer` on `input`; InputError when the window does not fit the input.
Shape output_shape(const LayerSpec& layer, Shape input);
// Parameters of the layer (weights then biases) on `input`.
std::size_t parameter_count(const LayerSpec& layer, Shape input);
// The layers with the classifier appended (Linear to `classes`).
std::vector<LayerSpec> with_classifier(const ModelSpec& spec, int classes);
// The output shape of every layer of with_classifier(spec, classes) on `input`; InputError
// naming the model and the layer when one does not fit its input.
std::vector<Shape> output_shapes(const ModelSpec& spec, Shape input, int classes);
// All parameters of the model on inputs of `input` shape with `classes` classes (the one count
// every caller uses: trainer, monitor, sweep). InputError when a layer does not fit.
std::size_t parameter_count(const ModelSpec& spec, Shape input, int classes);

}  // namespace sgp::model
