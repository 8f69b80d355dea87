// --model values: the forms that parse, what they mean, and the messages of those that do not.
#include <string>

#include <doctest/doctest.h>

#include "sgp/error.hpp"
#include "sgp/model/model_spec.hpp"
#include "support/input_error.hpp"

using namespace sgp::model;

namespace {

// The InputError message of parsing `text` ("" when it parses).
std::string error_of(const std::string& text) {
  return sgp::testing::input_error_of([&] { parse_model_spec(text); });
}

std::string names(const ModelSpec& spec) {
  std::string out;
  for (const auto& l : spec.layers) out += (out.empty() ? "" : ",") + layer_name(l);
  return out;
}

}  // namespace

TEST_CASE("model specs: mlp, lenet and layer lists") {
  CHECK(names(parse_model_spec("mlp:512,512")) == "linear512,relu,linear512,relu");
  CHECK(parse_model_spec("mlp:512,512").text == "mlp:512,512");
  CHECK(mlp_spec({17, 9}).text == "mlp:17,9");
  CHECK(names(parse_model_spec("lenet")) ==
        "conv6k5p2,relu,maxpool2,conv16k5,relu,maxpool2,flatten,linear120,relu,linear84,relu");
  CHECK(names(parse_model_spec("lenet-wide")) ==
        "conv16k5p2,relu,maxpool2,conv32k5,relu,maxpool2,flatten,linear128,relu,linear84,relu");
  // Every option, and defaults that layer_name leaves out.
  const auto spec = parse_model_spec("layers:conv8k3s2p1,avgpool3s2,maxpool2s2,flatten,linear7");
  CHECK(names(spec) == "conv8k3s2p1,avgpool3s2,maxpool2,flatten,linear7");
  CHECK(spec.layers[0] == LayerSpec{LayerKind::conv2d, 8, 3, 2, 1});
  CHECK(spec.layers[2].stride == 2);
}

TEST_CASE("shapes and parameter counts follow the layers") {
  const auto lenet = parse_model_spec("lenet");
  const auto shapes = output_shapes(lenet, {28, 28, 1}, 10);
  REQUIRE(shapes.size() == 12);
  CHECK(shapes[0] == Shape{28, 28, 6});  // padding 2 keeps 28 x 28
  CHECK(shapes[2] == Shape{14, 14, 6});
  CHECK(shapes[3] == Shape{10, 10, 16});
  CHECK(shapes[5] == Shape{5, 5, 16});
  CHECK(shapes[6] == Shape{1, 1, 400});
  CHECK(shapes.back() == Shape{1, 1, 10});
  CHECK(output_shape({LayerKind::max_pool, 0, 3, 2}, {7, 8, 4}) == Shape{3, 3, 4});
  CHECK(parameter_count({LayerKind::conv2d, 4, 3}, {9, 9, 2}) == (3 * 3 * 2 + 1) * 4);
  CHECK(parameter_count(parse_model_spec("mlp:3"), {2, 2, 1}, 5) == (4 + 1) * 3 + (3 + 1) * 5);
}

TEST_CASE("bad model specs say what is wrong") {
  CHECK(error_of("lenet:3") == "'lenet:3' is not a model: lenet and lenet-wide take no arguments");
  CHECK(error_of("resnet") ==
        "'resnet' is not a model: expected mlp:W1,W2,..., lenet, lenet-wide or layers:L1,L2,...");
  CHECK(error_of("mlp:") ==
        "'mlp:' is not a model: '' is not a width (expected a positive integer)");
  CHECK(error_of("mlp:512,0") == "'mlp:512,0' is not a model: a width must be in 1..65536, got 0");
  CHECK(error_of("mlp") == "'mlp' is not a model: give the list after a colon");
  CHECK(error_of("layers:conv6") ==
        "'layers:conv6' is not a model: layer 1 'conv6': conv needs a kernel size, e.g. conv6k5");
  CHECK(error_of("layers:linear10,pool2") ==
        "'layers:linear10,pool2' is not a model: layer 2 'pool2': unknown layer (expected linearN, "
        "relu, convCkK[sS][pP], maxpoolK[sS], avgpoolK[sS] or flatten)");
  CHECK(error_of("layers:maxpool2s0") ==
        "'layers:maxpool2s0' is not a model: layer 1 'maxpool2s0': maxpool s must be in "
        "1..65536, got 0");
  CHECK(error_of("layers:relu3") ==
        "'layers:relu3' is not a model: layer 1 'relu3': 'relu' takes no number");
  CHECK(error_of("layers:conv4k3x2") ==
        "'layers:conv4k3x2' is not a model: layer 1 'conv4k3x2': 'conv' takes no option 'x'");
  CHECK(error_of("layers:flatten,relu,linear3") ==
        "'layers:flatten,relu,linear3' is not a model: relu cannot come before the first layer");
  // A layer that does not fit its input is found when the shapes are known.
  try {
    output_shapes(parse_model_spec("layers:maxpool2,maxpool2"), {3, 3, 1}, 10);
    FAIL("a 2x2 pool on a 1x1 image was accepted");
  } catch (const sgp::InputError& e) {
    CHECK(std::string(e.what()) ==
          "model 'layers:maxpool2,maxpool2', layer 2: maxpool2 does not fit its 1x1x1 input "
          "(height x width x channels)");
  }
}
