#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include <doctest/doctest.h>

#include "sgp/compute/cpu_backend.hpp"
#include "sgp/compute/device.hpp"
#include "sgp/compute/device_buffer.hpp"
#include "sgp/error.hpp"

using namespace sgp::compute;

namespace {

std::vector<float> random_vector(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Reference row-major GEMM in double.
std::vector<float> naive_gemm(bool ta, bool tb, int m, int n, int k, const std::vector<float>& a,
                              const std::vector<float>& b) {
  std::vector<float> c(static_cast<std::size_t>(m) * n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double sum = 0;
      for (int p = 0; p < k; ++p) {
        const float av = ta ? a[p * m + i] : a[i * k + p];
        const float bv = tb ? b[j * k + p] : b[p * n + j];
        sum += static_cast<double>(av) * bv;
      }
      c[i * n + j] = static_cast<float>(sum);
    }
  return c;
}

}  // namespace

TEST_CASE("CPU gemm matches a naive product for every transpose combination and odd sizes") {
  CpuBackend backend;
  const int m = 7, n = 5, k = 13;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const auto a = random_vector(static_cast<std::size_t>(m) * k, 1);
      const auto b = random_vector(static_cast<std::size_t>(k) * n, 2);
      std::vector<float> c(static_cast<std::size_t>(m) * n, 0.0f);
      backend.gemm(ta ? Transpose::yes : Transpose::no, tb ? Transpose::yes : Transpose::no, m, n,
                   k, 1.0f, a.data(), ta ? m : k, b.data(), tb ? k : n, 0.0f, c.data(), n);
      const auto expected = naive_gemm(ta, tb, m, n, k, a, b);
      for (std::size_t i = 0; i < c.size(); ++i)
        CHECK(c[i] == doctest::Approx(expected[i]).epsilon(1e-5));
    }
}

TEST_CASE("bias, ReLU and their backward passes") {
  CpuBackend backend;
  std::vector<float> y = {-1.0f, 0.5f, 2.0f, -3.0f, 0.0f, 1.0f};
  const std::vector<float> bias = {0.5f, -1.0f, 0.0f};
  backend.bias_activation_forward(y.data(), bias.data(), 2, 3, true, 1.0f);
  CHECK(y == std::vector<float>{0.0f, 0.0f, 2.0f, 0.0f, 0.0f, 1.0f});
  std::vector<float> dy = {1, 2, 3, 4, 5, 6};
  backend.relu_backward(dy.data(), y.data(), dy.size());
  CHECK(dy == std::vector<float>{0, 0, 3, 0, 0, 6});
  std::vector<float> db(3);
  backend.bias_backward(dy.data(), 2, 3, db.data());
  CHECK(db == std::vector<float>{0, 0, 9});
  std::vector<float> linear = {1, 2, 3};
  backend.bias_activation_forward(linear.data(), bias.data(), 1, 3, false, 1.0f);
  CHECK(linear == std::vector<float>{1.5f, 1.0f, 3.0f});
  // A scaled bias (parameters kept as push-sum's x = w * z), then the ReLU on the scaled sum.
  std::vector<float> scaled = {1, 2, 3};
  backend.bias_activation_forward(scaled.data(), bias.data(), 1, 3, false, 2.0f);
  CHECK(scaled == std::vector<float>{2.0f, 0.0f, 3.0f});
  std::vector<float> clipped = {0, 1, -1};
  backend.bias_activation_forward(clipped.data(), bias.data(), 1, 3, true, 4.0f);
  CHECK(clipped == std::vector<float>{2.0f, 0.0f, 0.0f});
}

TEST_CASE("softmax cross-entropy: loss, gradient and accuracy against hand values") {
  CpuBackend backend;
  // Row 0: uniform logits over 4 classes: loss log 4. Row 1: a dominant correct class.
  const std::vector<float> logits = {0, 0, 0, 0, 0, 0, 10, 0};
  const std::vector<std::int32_t> labels = {1, 2};
  std::vector<float> grad(8);
  const double loss =
      backend.softmax_cross_entropy(logits.data(), labels.data(), 2, 4, grad.data());
  const double row1 = std::log(3.0 + std::exp(10.0)) - 10.0;
  CHECK(loss == doctest::Approx((std::log(4.0) + row1) / 2));
  CHECK(grad[0] == doctest::Approx(0.25 / 2));
  CHECK(grad[1] == doctest::Approx(-0.75 / 2));
  double row_sum = 0;
  for (int c = 4; c < 8; ++c) row_sum += grad[c];
  CHECK(row_sum == doctest::Approx(0.0).epsilon(1e-7));
  // Row 0 is a 4-way tie: arg-max picks class 0, which is wrong; row 1 is right.
  CHECK(backend.count_correct(logits.data(), labels.data(), 2, 4) == 1);
}

TEST_CASE("push-sum vector arithmetic") {
  CpuBackend backend;
  std::vector<float> x = {1, 2, 3, 4};
  backend.scale(x.data(), x.size(), 0.5f);
  CHECK(x == std::vector<float>{0.5f, 1, 1.5f, 2});
  const std::vector<float> y = {2, 2, 2, 2};
  backend.axpy(0.25f, y.data(), x.data(), x.size());
  CHECK(x == std::vector<float>{1, 1.5f, 2, 2.5f});
  std::vector<float> z(4);
  backend.debias(x.data(), 0.5, z.data(), z.size());
  CHECK(z == std::vector<float>{2, 3, 4, 5});
  CHECK(backend.squared_distance(z.data(), x.data(), 4) == doctest::Approx(1 + 2.25 + 4 + 6.25));
  CHECK(backend.squared_norm(y.data(), 4) == doctest::Approx(16));
  CHECK_THROWS_AS(backend.debias(x.data(), 0.0, z.data(), 4), sgp::InvariantError);
  backend.fill(z.data(), z.size(), -1.0f);
  CHECK(z == std::vector<float>{-1, -1, -1, -1});
}

TEST_CASE("device buffers move, upload and download") {
  CpuBackend backend;
  const std::vector<float> host = {1, 2, 3};
  DeviceBuffer<float> a(backend, std::span<const float>(host));
  DeviceBuffer<float> b = std::move(a);
  CHECK(a.empty());
  CHECK(b.to_host() == host);
  CHECK_THROWS_AS(b.upload(std::span<const float>(host), 1), sgp::InvariantError);
}

TEST_CASE("--device values are parsed and bad ones named") {
  CHECK(make_backend({"cpu"})->kind() == DeviceKind::cpu);
  // auto yields the GPU when one is usable, else the CPU.
  CHECK(make_backend({"auto"})->kind() ==
        (sgp::compute::cuda_device_count() > 0 ? DeviceKind::cuda : DeviceKind::cpu));
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "cuda:-1", ""}) {
    try {
      make_backend({bad});
      FAIL("accepted " << bad);
    } catch (const sgp::InputError& e) {
      CHECK(std::string(e.what()).find("--device") != std::string::npos);
    }
  }
  if (cuda_device_count() == 0) {
    CHECK_THROWS_AS(make_backend({"cuda"}), sgp::InputError);
  }
  CHECK_THROWS_AS(make_backend({"cpu", 0}), sgp::InputError);
}

TEST_CASE("a host's peers spread over its GPUs: cuda:i as given, else local index mod GPUs") {
  using sgp::compute::gpu_index;
  // Four peers on a host with two GPUs: 0, 1, 0, 1.
  CHECK(gpu_index("cuda", 0, 2) == 0);
  CHECK(gpu_index("cuda", 1, 2) == 1);
  CHECK(gpu_index("cuda", 2, 2) == 0);
  CHECK(gpu_index("auto", 3, 2) == 1);
  CHECK(gpu_index("cuda", 5, 8) == 5);
  CHECK(gpu_index("cuda:1", 0, 2) == 1);  // an explicit index wins
  CHECK(gpu_index("cuda", 3, 0) == 0);    // no GPU: the caller reports that
  CHECK_THROWS_AS(gpu_index("gpu", 0, 2), sgp::InputError);
}
