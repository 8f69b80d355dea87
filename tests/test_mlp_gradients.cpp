#include <cmath>
#include <random>
#include <vector>

#include <doctest/doctest.h>

#include "sgp/compute/cpu_backend.hpp"
#include "sgp/compute/device_buffer.hpp"
#include "sgp/model/mlp.hpp"

using sgp::compute::CpuBackend;
using sgp::compute::DeviceBuffer;
using sgp::model::Mlp;

namespace {

// Checks the analytic gradient of the mean loss against central finite differences in double
// precision... of a float network, so the step and the bound are chosen for float32.
void check_gradients(std::vector<int> widths, int batch, unsigned seed) {
  CAPTURE(batch);
  CpuBackend backend;
  Mlp mlp(backend, widths, batch);
  auto params = mlp.initial_parameters(seed);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> inputs(static_cast<std::size_t>(batch) * widths.front());
  for (auto& v : inputs) v = normal(rng);
  std::vector<std::int32_t> labels(batch);
  for (auto& l : labels) l = static_cast<std::int32_t>(rng() % widths.back());

  std::vector<float> grads(params.size());
  mlp.forward_backward(params.data(), inputs.data(), labels.data(), batch, grads.data());

  auto loss_at = [&](std::vector<float>& p) {
    const float* logits = mlp.forward(p.data(), inputs.data(), batch);
    return backend.softmax_cross_entropy(logits, labels.data(), batch, widths.back(), nullptr);
  };
  // Every parameter of small nets; a strided sample of larger ones. A ReLU kink inside
  // [p - h, p + h] makes the central difference meaningless there, so each parameter is
  // differenced with steps h and h/2: where the two disagree, a kink was crossed and that
  // parameter is skipped (at most a tenth may be); elsewhere the analytic value must match.
  const std::size_t stride = std::max<std::size_t>(1, params.size() / 300);
  auto central_difference = [&](std::size_t i, float h) {
    const float saved = params[i];
    params[i] = saved + h;
    const double plus = loss_at(params);
    params[i] = saved - h;
    const double minus = loss_at(params);
    params[i] = saved;
    return (plus - minus) / (2.0 * h);
  };
  auto relative = [](double a, double b) {
    // With a floor: float32 losses carry ~1e-7 relative noise, divided by the step.
    return std::abs(a - b) / std::max(1e-2, std::abs(a) + std::abs(b));
  };
  int checked = 0, skipped = 0;
  for (std::size_t i = 0; i < params.size(); i += stride) {
    const double coarse = central_difference(i, 4e-3f);
    const double fine = central_difference(i, 2e-3f);
    if (relative(coarse, fine) > 1e-2) {
      ++skipped;
      continue;
    }
    CHECK_MESSAGE(relative(fine, grads[i]) < 1e-2,
                  "parameter " << i << ": analytic " << grads[i] << " numeric " << fine);
    ++checked;
  }
  CHECK(skipped * 10 <= checked + skipped);
  CHECK(checked > 0);
}

}  // namespace

TEST_CASE("MLP backward agrees with finite differences") {
  SUBCASE("one hidden layer") { check_gradients({6, 5, 3}, 4, 1); }
  SUBCASE("odd sizes, two hidden layers") { check_gradients({7, 9, 11, 5}, 3, 2); }
  SUBCASE("batch 1") { check_gradients({13, 17, 4}, 1, 3); }
  SUBCASE("no hidden layer") { check_gradients({5, 3}, 6, 4); }
  SUBCASE("wider odd shape, strided sample") { check_gradients({65, 33, 17, 10}, 8, 5); }
}

TEST_CASE("MLP parameter layout is one contiguous buffer of the documented size") {
  CpuBackend backend;
  Mlp mlp(backend, {784, 512, 512, 10}, 32);
  CHECK(mlp.parameter_count() == 669706);  // W1: 784*512+512 + 512*512+512 + 512*10+10
  CHECK(mlp.layers()[1].weight_offset == 784 * 512 + 512);
  CHECK(mlp.layers()[2].bias_offset == mlp.parameter_count() - 10);
}

TEST_CASE("initialisation is identical for the same seed and bounded by 1/sqrt(fan-in)") {
  CpuBackend backend;
  Mlp mlp(backend, {100, 30, 10}, 1);
  const auto a = mlp.initial_parameters(42);
  CHECK(a == mlp.initial_parameters(42));
  CHECK(a != mlp.initial_parameters(43));
  for (std::size_t i = 0; i < 100 * 30 + 30; ++i) CHECK(std::abs(a[i]) <= 0.1f);
}
