#include "sgp/model/model_spec.hpp"

#include <charconv>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "sgp/error.hpp"

namespace sgp::model {

namespace {

constexpr int kMaxNumber = 1 << 16;  // far beyond any sensible width, kernel or stride
constexpr std::string_view kLenet =
    "conv6k5p2,relu,maxpool2,conv16k5,relu,maxpool2,flatten,linear120,relu,linear84,relu";
// LeNet-5's shape with 16 and 32 channels and 128 hidden units: 2 epochs reach 90% where
// LeNet-5 itself stops near 89%, at about a third of its speed.
constexpr std::string_view kLenetWide =
    "conv16k5p2,relu,maxpool2,conv32k5,relu,maxpool2,flatten,linear128,relu,linear84,relu";
constexpr std::string_view kForms = "mlp:W1,W2,..., lenet, lenet-wide or layers:L1,L2,...";

std::vector<std::string_view> split(std::string_view text, char delimiter) {
  std::vector<std::string_view> parts;
  std::size_t begin = 0;
  for (std::size_t at = text.find(delimiter); at != std::string_view::npos;
       begin = at + 1, at = text.find(delimiter, begin)) {
    parts.push_back(text.substr(begin, at - begin));
  }
  parts.push_back(text.substr(begin));
  return parts;
}

// Reads the decimal number at the front of `text` (advancing it); nothing when there is none.
std::optional<int> take_number(std::string_view& text) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  text.remove_prefix(static_cast<std::size_t>(end - text.data()));
  return value;
}

// A layer token: a word, an optional number, then letter+number options, e.g. "conv6k5p2".
struct Token {
  std::string word;
  std::optional<int> number;
  std::map<char, int> options;
};

Token tokenize(std::string_view text) {
  Token t;
  while (!text.empty() && text.front() >= 'a' && text.front() <= 'z') {
    t.word += text.front();
    text.remove_prefix(1);
  }
  t.number = take_number(text);
  while (!text.empty()) {
    const char option = text.front();
    text.remove_prefix(1);
    const auto value = take_number(text);
    if (!value || t.options.contains(option)) {
      throw InputError(fmt::format("cannot read '{}{}'", option, text));
    }
    t.options[option] = *value;
  }
  return t;
}

int checked(int value, int min, std::string_view what) {
  if (value < min || value > kMaxNumber) {
    throw InputError(fmt::format("{} must be in {}..{}, got {}", what, min, kMaxNumber, value));
  }
  return value;
}

LayerSpec parse_layer(std::string_view text) {
  const Token t = tokenize(text);
  auto allow = [&](std::string_view options, bool number) {
    for (const auto& [option, value] : t.options) {
      if (options.find(option) == std::string_view::npos) {
        throw InputError(fmt::format("'{}' takes no option '{}'", t.word, option));
      }
    }
    if (number != t.number.has_value()) {
      throw InputError(fmt::format("'{}' {}", t.word,
                                   number ? "needs a number, e.g. linear120" : "takes no number"));
    }
  };
  auto option = [&](char name, int fallback, int min) {
    const auto it = t.options.find(name);
    return checked(it == t.options.end() ? fallback : it->second, min,
                   fmt::format("{} {}", t.word, name));
  };
  LayerSpec l;
  if (t.word == "relu" || t.word == "flatten") {
    allow("", false);
    l.kind = t.word == "relu" ? LayerKind::relu : LayerKind::flatten;
  } else if (t.word == "linear") {
    allow("", true);
    l.kind = LayerKind::linear;
    l.size = checked(*t.number, 1, "linear width");
  } else if (t.word == "conv") {
    allow("ksp", true);
    if (!t.options.contains('k')) throw InputError("conv needs a kernel size, e.g. conv6k5");
    l.kind = LayerKind::conv2d;
    l.size = checked(*t.number, 1, "conv channels");
    l.kernel = option('k', 0, 1);
    l.stride = option('s', 1, 1);
    l.padding = option('p', 0, 0);
  } else if (t.word == "maxpool" || t.word == "avgpool") {
    allow("s", true);
    l.kind = t.word == "maxpool" ? LayerKind::max_pool : LayerKind::avg_pool;
    l.kernel = checked(*t.number, 1, t.word + " kernel");
    l.stride = option('s', l.kernel, 1);
  } else {
    throw InputError(
        "unknown layer (expected linearN, relu, convCkK[sS][pP], maxpoolK[sS], "
        "avgpoolK[sS] or flatten)");
  }
  return l;
}

std::vector<LayerSpec> parse_layers(std::string_view list) {
  std::vector<LayerSpec> layers;
  int index = 0;
  for (std::string_view token : split(list, ',')) {
    ++index;
    try {
      layers.push_back(parse_layer(token));
    } catch (const InputError& e) {
      throw InputError(fmt::format("layer {} '{}': {}", index, token, e.what()));
    }
  }
  // A leading ReLU would work in place on the caller's input batch.
  for (const LayerSpec& l : layers) {
    if (l.kind == LayerKind::relu) throw InputError("relu cannot come before the first layer");
    if (l.kind != LayerKind::flatten) break;
  }
  return layers;
}

std::vector<LayerSpec> parse_mlp(std::string_view widths) {
  std::vector<int> hidden;
  for (std::string_view token : split(widths, ',')) {
    std::string_view rest = token;
    const auto width = take_number(rest);
    if (!width || !rest.empty()) {
      throw InputError(fmt::format("'{}' is not a width (expected a positive integer)", token));
    }
    hidden.push_back(checked(*width, 1, "a width"));
  }
  return mlp_spec(hidden).layers;
}

}  // namespace

ModelSpec parse_model_spec(std::string_view text) {
  ModelSpec spec{std::string(text), {}};
  try {
    if (text == "lenet") {
      spec.layers = parse_layers(kLenet);
    } else if (text == "lenet-wide") {
      spec.layers = parse_layers(kLenetWide);
    } else if (text.starts_with("mlp:")) {
      spec.layers = parse_mlp(text.substr(4));
    } else if (text.starts_with("layers:")) {
      spec.layers = parse_layers(text.substr(7));
    } else if (text.starts_with("lenet") || text == "mlp" || text == "layers") {
      throw InputError(text.starts_with("lenet") ? "lenet and lenet-wide take no arguments"
                                                 : "give the list after a colon");
    } else {
      throw InputError(fmt::format("expected {}", kForms));
    }
  } catch (const InputError& e) {
    throw InputError(fmt::format("'{}' is not a model: {}", text, e.what()));
  }
  return spec;
}

ModelSpec mlp_spec(const std::vector<int>& hidden) {
  ModelSpec spec{"mlp:", {}};
  for (std::size_t i = 0; i < hidden.size(); ++i) {
    spec.text += fmt::format("{}{}", i ? "," : "", hidden[i]);
    spec.layers.push_back({LayerKind::linear, hidden[i]});
    spec.layers.push_back({LayerKind::relu});
  }
  return spec;
}

std::string layer_name(const LayerSpec& l) {
  switch (l.kind) {
    case LayerKind::linear:
      return fmt::format("linear{}", l.size);
    case LayerKind::relu:
      return "relu";
    case LayerKind::flatten:
      return "flatten";
    case LayerKind::conv2d:
      return fmt::format("conv{}k{}{}{}", l.size, l.kernel,
                         l.stride != 1 ? fmt::format("s{}", l.stride) : "",
                         l.padding ? fmt::format("p{}", l.padding) : "");
    case LayerKind::max_pool:
    case LayerKind::avg_pool:
      return fmt::format("{}pool{}{}", l.kind == LayerKind::max_pool ? "max" : "avg", l.kernel,
                         l.stride != l.kernel ? fmt::format("s{}", l.stride) : "");
  }
  return "?";
}

Shape output_shape(const LayerSpec& l, Shape in) {
  switch (l.kind) {
    case LayerKind::linear:
      return {1, 1, l.size};
    case LayerKind::relu:
      return in;
    case LayerKind::flatten:
      return {1, 1, static_cast<int>(in.size())};
    case LayerKind::conv2d:
    case LayerKind::max_pool:
    case LayerKind::avg_pool: {
      const int padding = l.kind == LayerKind::conv2d ? l.padding : 0;
      const int h = in.height + 2 * padding - l.kernel, w = in.width + 2 * padding - l.kernel;
      if (h < 0 || w < 0) {
        throw InputError(
            fmt::format("{} does not fit its {}x{}x{} input (height x width x channels)",
                        layer_name(l), in.height, in.width, in.channels));
      }
      return {h / l.stride + 1, w / l.stride + 1,
              l.kind == LayerKind::conv2d ? l.size : in.channels};
    }
  }
  return in;
}

std::size_t parameter_count(const LayerSpec& l, Shape in) {
  if (l.kind == LayerKind::linear) return (in.size() + 1) * static_cast<std::size_t>(l.size);
  if (l.kind == LayerKind::conv2d) {
    return (static_cast<std::size_t>(l.kernel) * l.kernel * in.channels + 1) * l.size;
  }
  return 0;
}

std::vector<LayerSpec> with_classifier(const ModelSpec& spec, int classes) {
  std::vector<LayerSpec> layers = spec.layers;
  layers.push_back({LayerKind::linear, classes});
  return layers;
}

std::vector<Shape> output_shapes(const ModelSpec& spec, Shape input, int classes) {
  std::vector<Shape> shapes;
  const auto layers = with_classifier(spec, classes);
  for (std::size_t i = 0; i < layers.size(); ++i) {
    try {
      shapes.push_back(output_shape(layers[i], i ? shapes.back() : input));
    } catch (const InputError& e) {
      throw InputError(fmt::format("model '{}', layer {}: {}", spec.text, i + 1, e.what()));
    }
  }
  return shapes;
}

std::size_t parameter_count(const ModelSpec& spec, Shape input, int classes) {
  const auto layers = with_classifier(spec, classes);
  const auto shapes = output_shapes(spec, input, classes);
  std::size_t count = 0;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    count += parameter_count(layers[i], i ? shapes[i - 1] : input);
  }
  return count;
}

}  // namespace sgp::model
