// Networks built from layer lists: finite-difference gradient checks that put every layer kind
// (Linear, ReLU fused and not, Conv2d with stride and padding, MaxPool2d and AvgPool2d with and
// without overlapping windows, Flatten) at odd sizes and batch 1, and the parameter layout.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "sgp/compute/cpu_backend.hpp"
#include "sgp/error.hpp"
#include "sgp/model/model_spec.hpp"
#include "sgp/model/network.hpp"
#include "support/gradient_check.hpp"

using sgp::compute::CpuBackend;
using sgp::model::Network;
using sgp::model::parse_model_spec;
using sgp::model::Shape;

namespace {

struct Batch {
  std::vector<float> inputs;
  std::vector<std::int32_t> labels;
};

Batch random_batch(Shape shape, int batch, int classes, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Batch b;
  b.inputs.resize(batch * shape.size());
  for (auto& v : b.inputs) v = normal(rng);
  for (int i = 0; i < batch; ++i) b.labels.push_back(static_cast<std::int32_t>(rng() % classes));
  return b;
}

void check_gradients(const std::string& model, Shape input, int batch, unsigned seed,
                     double allowed_mismatches = 0.0) {
  CAPTURE(model);
  CAPTURE(batch);
  constexpr int kClasses = 5;
  CpuBackend backend;
  Network net(backend, parse_model_spec(model), input, kClasses, batch);
  auto params = net.initial_parameters(seed);
  const Batch b = random_batch(input, batch, kClasses, seed);
  std::vector<float> grads(params.size());
  net.forward_backward(params.data(), b.inputs.data(), b.labels.data(), batch, grads.data());
  sgp::testing::check_against_finite_differences(
      params, grads,
      [&](const std::vector<float>& p) {
        const float* logits = net.forward(p.data(), b.inputs.data(), batch);
        return backend.softmax_cross_entropy(logits, b.labels.data(), batch, kClasses, nullptr);
      },
      allowed_mismatches);
}

}  // namespace

TEST_CASE("every layer's backward agrees with finite differences") {
  SUBCASE("linear and fused relu on an image input, batch 1") {
    check_gradients("mlp:7,3", {3, 3, 2}, 1, 1);
  }
  SUBCASE("conv with stride 2 and padding 1, odd sizes, batch 1") {
    check_gradients("layers:conv3k3s2p1,relu", {7, 5, 2}, 1, 2);
  }
  SUBCASE("two convs: the second's input gradient goes through col2im") {
    check_gradients("layers:conv3k3p1,relu,conv4k2s2", {6, 7, 2}, 2, 3);
  }
  SUBCASE("max pool over an odd input (the last row and column are dropped)") {
    check_gradients("layers:conv3k2,relu,maxpool2", {7, 7, 1}, 3, 4);
  }
  SUBCASE("overlapping max pool, batch 1") {
    check_gradients("layers:conv2k3p1,maxpool3s2", {7, 7, 2}, 1, 5);
  }
  SUBCASE("overlapping avg pool, then an unfused relu, flatten and linear") {
    check_gradients("layers:conv3k3,avgpool3s2,relu,flatten,linear5,relu", {9, 9, 1}, 2, 6);
  }
  SUBCASE("flatten first (in place on the input)") {
    check_gradients("layers:flatten,linear6,relu", {3, 5, 1}, 1, 7);
  }
  SUBCASE("lenet on Fashion-MNIST-sized images, batch 1, strided sample") {
    check_gradients("lenet", {28, 28, 1}, 1, 8, 0.03);
  }
}

TEST_CASE("the forward pass leaves the caller's input untouched") {
  CpuBackend backend;
  for (const char* model : {"layers:flatten,linear4,relu", "layers:conv2k3,relu,maxpool2"}) {
    CAPTURE(model);
    Network net(backend, parse_model_spec(model), {5, 5, 1}, 3, 2);
    const auto params = net.initial_parameters(1);
    Batch b = random_batch({5, 5, 1}, 2, 3, 9);
    const auto before = b.inputs;
    std::vector<float> grads(params.size());
    net.forward_backward(params.data(), b.inputs.data(), b.labels.data(), 2, grads.data());
    CHECK(b.inputs == before);
  }
}

TEST_CASE("parameter layout: one flat buffer, counts as documented, seeded initialisation") {
  CpuBackend backend;
  const Shape image{28, 28, 1};
  Network lenet(backend, parse_model_spec("lenet"), image, 10, 4);
  // conv 6x(5x5x1)+6, conv 16x(5x5x6)+16, linear 400->120, 120->84, 84->10
  CHECK(lenet.parameter_count() == 156 + 2416 + 48120 + 10164 + 850);
  CHECK(lenet.parameter_count() ==
        sgp::model::parameter_count(parse_model_spec("lenet"), image, 10));
  CHECK(lenet.parameter_offset(3) == 156);  // conv, relu, maxpool, then the second conv
  CHECK(sgp::model::parameter_count(parse_model_spec("mlp:512,512"), image, 10) == 669706);
  const auto a = lenet.initial_parameters(42);
  CHECK(a == lenet.initial_parameters(42));
  CHECK(a != lenet.initial_parameters(43));
  for (std::size_t i = 0; i < 156; ++i) CHECK(std::abs(a[i]) <= 0.2f);  // 1/sqrt(25)
}

TEST_CASE("a forward-only network refuses to compute gradients; batches are bounded") {
  CpuBackend backend;
  Network net(backend, parse_model_spec("mlp:4"), {2, 2, 1}, 3, 2, false);
  const auto params = net.initial_parameters(0);
  const Batch b = random_batch({2, 2, 1}, 3, 3, 1);
  std::vector<float> grads(params.size());
  CHECK_THROWS_AS(
      net.forward_backward(params.data(), b.inputs.data(), b.labels.data(), 1, grads.data()),
      sgp::InvariantError);
  CHECK_THROWS_AS(net.forward(params.data(), b.inputs.data(), 3), sgp::InvariantError);
}

// Push-sum trains at z = x / w without writing z: the network folds 1 / w into each layer.
TEST_CASE("parameters with a scale give the loss and gradient of the scaled parameters") {
  constexpr int kClasses = 4, kBatch = 3;
  const Shape input{6, 6, 2};
  CpuBackend backend;
  for (const char* model : {"mlp:7,5", "layers:conv3k3p1,relu,maxpool2,flatten,linear6,relu"}) {
    CAPTURE(model);
    Network net(backend, parse_model_spec(model), input, kClasses, kBatch);
    const auto z = net.initial_parameters(11);
    const Batch b = random_batch(input, kBatch, kClasses, 12);
    std::vector<float> z_grads(z.size()), x_grads(z.size());
    const double z_loss =
        net.forward_backward(z.data(), b.inputs.data(), b.labels.data(), kBatch, z_grads.data());
    for (const double w : {0.5, 0.37, 1.9}) {
      CAPTURE(w);
      std::vector<float> x(z.size());
      for (std::size_t i = 0; i < z.size(); ++i) x[i] = static_cast<float>(z[i] * w);
      const double x_loss = net.forward_backward(x.data(), b.inputs.data(), b.labels.data(), kBatch,
                                                 x_grads.data(), static_cast<float>(1 / w));
      CHECK(x_loss == doctest::Approx(z_loss).epsilon(1e-5));
      double worst = 0.0, largest = 0.0;
      for (std::size_t i = 0; i < z.size(); ++i) {
        worst = std::max(worst, static_cast<double>(std::abs(x_grads[i] - z_grads[i])));
        largest = std::max(largest, static_cast<double>(std::abs(z_grads[i])));
      }
      CHECK(worst <= 1e-5 * largest);
      // Unscaled, x is a different model: the check above can fail.
      net.forward_backward(x.data(), b.inputs.data(), b.labels.data(), kBatch, x_grads.data());
      CHECK(x_grads != z_grads);
    }
  }
  Network net(backend, parse_model_spec("mlp:3"), input, kClasses, kBatch);
  const auto params = net.initial_parameters(0);
  const Batch b = random_batch(input, kBatch, kClasses, 1);
  std::vector<float> grads(params.size());
  CHECK_THROWS_AS(net.forward_backward(params.data(), b.inputs.data(), b.labels.data(), kBatch,
                                       grads.data(), 0.0f),
                  sgp::InvariantError);
  CHECK_THROWS_AS(net.forward(params.data(), b.inputs.data(), kBatch, INFINITY),
                  sgp::InvariantError);
}
