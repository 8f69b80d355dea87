// The CUDA convolution and pooling kernels (kernels/im2col.cu, kernels/pooling.cu) and the
// stand-alone ReLU against the CPU reference, at odd sizes, with stride, padding and
// overlapping windows; then whole CNN steps. Part of test_cuda (main in test_cuda_backend.cpp):
// skipped, visibly, without a usable GPU.
#include <cstdint>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "sgp/model/model_spec.hpp"
#include "sgp/model/network.hpp"
#include "support/cuda_test_support.hpp"

using namespace sgp::compute;
using namespace sgp::cuda_test;

namespace {

// Odd shapes; stride 1 and 2; padding 0..2; windows that overlap (stride < kernel) and not.
const std::vector<Window> kConvWindows = {
    {1, 5, 7, 3, 3, 1, 1}, {3, 9, 8, 2, 3, 2, 0}, {2, 28, 28, 1, 5, 1, 2}, {4, 7, 7, 5, 2, 2, 0}};
const std::vector<Window> kPoolWindows = {
    {1, 7, 9, 3, 2, 2, 0}, {3, 8, 8, 6, 2, 2, 0}, {2, 9, 7, 4, 3, 2, 0}, {5, 28, 28, 6, 2, 2, 0}};

std::string describe(const Window& w) {
  return "batch " + std::to_string(w.batch) + " " + std::to_string(w.height) + "x" +
         std::to_string(w.width) + "x" + std::to_string(w.channels) + " k" +
         std::to_string(w.kernel) + " s" + std::to_string(w.stride) + " p" +
         std::to_string(w.padding);
}

}  // namespace

TEST_CASE("cuda relu forward matches the CPU" * doctest::skip(no_gpu())) {
  Backends b;
  for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{100003}}) {
    for (std::size_t offset : {0, 1}) {  // offset 1: the unaligned, scalar path
      std::vector<float> x = random_vector(n, 3);
      OnGpu<float> gx(b.gpu, x, offset);
      b.cpu.relu_forward(x.data(), n);
      b.gpu.relu_forward(gx.data(), n);
      check_equal(gx.to_host(), x, "relu n=" + std::to_string(n));
    }
  }
}

TEST_CASE("cuda im2col and col2im match the CPU" * doctest::skip(no_gpu())) {
  Backends b;
  for (const Window& w : kConvWindows) {
    const std::string what = describe(w);
    const auto x = random_vector(w.input_size(), 5);
    std::vector<float> cols(w.positions() * w.patch());
    b.cpu.im2col(x.data(), w, cols.data());
    OnGpu<float> gx(b.gpu, x), gcols(b.gpu, std::vector<float>(cols.size(), -1.0f));
    b.gpu.im2col(gx.data(), w, gcols.data());
    check_equal(gcols.to_host(), cols, "im2col " + what);  // copies and zeros: exact

    const auto dcols = random_vector(cols.size(), 6);
    std::vector<float> dx(w.input_size());
    b.cpu.col2im(dcols.data(), w, dx.data());
    OnGpu<float> gdcols(b.gpu, dcols), gdx(b.gpu, std::vector<float>(dx.size(), -1.0f));
    b.gpu.col2im(gdcols.data(), w, gdx.data());
    // At most kernel^2 terms per element, added in another order than on the CPU.
    check_close(gdx.to_host(), dx, 1e-5, "col2im " + what);
  }
}

TEST_CASE("cuda max and average pooling match the CPU" * doctest::skip(no_gpu())) {
  Backends b;
  for (const Window& w : kPoolWindows) {
    const std::string what = describe(w);
    const auto x = random_vector(w.input_size(), 7);
    const auto dy = random_vector(w.pooled_size(), 8);
    OnGpu<float> gx(b.gpu, x), gdy(b.gpu, dy);
    std::vector<float> y(w.pooled_size()), dx(w.input_size());
    std::vector<std::int32_t> argmax(w.pooled_size());
    OnGpu<float> gy(b.gpu, y), gdx(b.gpu, std::vector<float>(dx.size(), -1.0f));
    OnGpu<std::int32_t> gargmax(b.gpu, argmax);

    b.cpu.max_pool_forward(x.data(), w, y.data(), argmax.data());
    b.gpu.max_pool_forward(gx.data(), w, gy.data(), gargmax.data());
    check_equal(gy.to_host(), y, "max pool " + what);
    CHECK_MESSAGE(gargmax.to_host() == argmax, "argmax " << what);
    b.cpu.max_pool_backward(dy.data(), argmax.data(), w, dx.data());
    b.gpu.max_pool_backward(gdy.data(), gargmax.data(), w, gdx.data());
    // Overlapping windows add atomically, in any order: close, not equal.
    check_close(gdx.to_host(), dx, 1e-6, "max pool backward " + what);

    b.cpu.avg_pool_forward(x.data(), w, y.data());
    b.gpu.avg_pool_forward(gx.data(), w, gy.data());
    check_close(gy.to_host(), y, 1e-6, "avg pool " + what);
    b.cpu.avg_pool_backward(dy.data(), w, dx.data());
    b.gpu.avg_pool_backward(gdy.data(), w, gdx.data());
    check_close(gdx.to_host(), dx, 1e-6, "avg pool backward " + what);
  }
}

TEST_CASE("a whole CNN step (forward, backward) on the GPU matches the CPU" *
          doctest::skip(no_gpu())) {
  struct Case {
    const char* model;
    sgp::model::Shape input;
    int batch;
  };
  for (const Case& t :
       {Case{"lenet", {28, 28, 1}, 32},
        Case{"layers:conv5k3s2p1,avgpool3s2,relu,conv4k2,flatten,linear9,relu", {13, 11, 3}, 1}}) {
    CAPTURE(t.model);
    Backends b;
    const auto spec = sgp::model::parse_model_spec(t.model);
    sgp::model::Network cpu_net(b.cpu, spec, t.input, 10, t.batch);
    sgp::model::Network gpu_net(b.gpu, spec, t.input, 10, t.batch);
    const auto params = cpu_net.initial_parameters(42);
    const auto inputs = random_vector(t.batch * t.input.size(), 43);
    std::vector<std::int32_t> labels(t.batch);
    for (int i = 0; i < t.batch; ++i) labels[i] = (i * 7) % 10;
    OnGpu<float> gparams(b.gpu, params), ginputs(b.gpu, inputs);
    OnGpu<std::int32_t> glabels(b.gpu, labels);
    // 0.6: parameters kept as push-sum's x = w * z, the network given 1 / w (trainer's step).
    for (const float scale : {1.0f, 0.6f}) {
      CAPTURE(scale);
      std::vector<float> grads(params.size());
      OnGpu<float> ggrads(b.gpu, grads);
      const double loss = cpu_net.forward_backward(params.data(), inputs.data(), labels.data(),
                                                   t.batch, grads.data(), scale);
      const double gloss = gpu_net.forward_backward(gparams.data(), ginputs.data(), glabels.data(),
                                                    t.batch, ggrads.data(), scale);
      CHECK(gloss == doctest::Approx(loss).epsilon(1e-5));
      // fp32 GEMMs and sums in different orders through several layers (as for the MLP step).
      check_close(ggrads.to_host(), grads, 1e-4, std::string("gradients of ") + t.model);
    }
  }
}
