#pragma once
// A CPU backend that says it is a GPU (kind() == cuda): the push-sum engine then takes its
// device path (host staging buffers, download/upload, device scratch) while every operation still
// runs on the CPU, so that path is tested on machines without a GPU.
#include "sgp/compute/cpu_backend.hpp"

namespace sgp::testing {

class StagedCpuBackend final : public compute::Backend {
 public:
  compute::DeviceKind kind() const override { return compute::DeviceKind::cuda; }
  std::string describe() const override { return "cpu pretending to be a device (tests)"; }
  void* allocate(std::size_t bytes) override { return cpu_.allocate(bytes); }
  void deallocate(void* p) noexcept override { cpu_.deallocate(p); }
  void* allocate_host(std::size_t bytes) override { return cpu_.allocate_host(bytes); }
  void deallocate_host(void* p) noexcept override { cpu_.deallocate_host(p); }
  void upload(void* d, const void* s, std::size_t b) override { cpu_.upload(d, s, b); }
  void download(void* d, const void* s, std::size_t b) override { cpu_.download(d, s, b); }
  void copy(void* d, const void* s, std::size_t b) override { cpu_.copy(d, s, b); }
  void download_async(void* d, const void* s, std::size_t b) override {
    cpu_.download_async(d, s, b);
  }
  void upload_async(void* d, const void* s, std::size_t b) override { cpu_.upload_async(d, s, b); }
  void wait_transfers() override { cpu_.wait_transfers(); }
  void synchronize() override { cpu_.synchronize(); }
  void gemm(compute::Transpose ta, compute::Transpose tb, int m, int n, int k, float alpha,
            const float* a, int lda, const float* b, int ldb, float beta, float* c,
            int ldc) override {
    cpu_.gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  void bias_activation_forward(float* y, const float* bias, int rows, int cols, bool relu,
                               float bias_scale) override {
    cpu_.bias_activation_forward(y, bias, rows, cols, relu, bias_scale);
  }
  void relu_backward(float* dy, const float* y, std::size_t n) override {
    cpu_.relu_backward(dy, y, n);
  }
  void bias_backward(const float* dy, int rows, int cols, float* db) override {
    cpu_.bias_backward(dy, rows, cols, db);
  }
  double softmax_cross_entropy(const float* logits, const std::int32_t* labels, int rows, int cols,
                               float* dlogits) override {
    return cpu_.softmax_cross_entropy(logits, labels, rows, cols, dlogits);
  }
  std::int64_t count_correct(const float* logits, const std::int32_t* labels, int rows,
                             int cols) override {
    return cpu_.count_correct(logits, labels, rows, cols);
  }
  void sgd_update(float* params, const float* grads, float* velocity, std::size_t n,
                  const compute::SgdStep& step) override {
    cpu_.sgd_update(params, grads, velocity, n, step);
  }
  void relu_forward(float* x, std::size_t n) override { cpu_.relu_forward(x, n); }
  void im2col(const float* x, const compute::Window& w, float* cols) override {
    cpu_.im2col(x, w, cols);
  }
  void col2im(const float* cols, const compute::Window& w, float* dx) override {
    cpu_.col2im(cols, w, dx);
  }
  void max_pool_forward(const float* x, const compute::Window& w, float* y,
                        std::int32_t* argmax) override {
    cpu_.max_pool_forward(x, w, y, argmax);
  }
  void max_pool_backward(const float* dy, const std::int32_t* argmax, const compute::Window& w,
                         float* dx) override {
    cpu_.max_pool_backward(dy, argmax, w, dx);
  }
  void avg_pool_forward(const float* x, const compute::Window& w, float* y) override {
    cpu_.avg_pool_forward(x, w, y);
  }
  void avg_pool_backward(const float* dy, const compute::Window& w, float* dx) override {
    cpu_.avg_pool_backward(dy, w, dx);
  }
  void fill(float* x, std::size_t n, float v) override { cpu_.fill(x, n, v); }
  void scale(float* x, std::size_t n, float a) override { cpu_.scale(x, n, a); }
  void axpy(float a, const float* x, float* y, std::size_t n) override { cpu_.axpy(a, x, y, n); }
  void debias(const float* x, double w, float* z, std::size_t n) override {
    cpu_.debias(x, w, z, n);
  }
  double squared_distance(const float* a, const float* b, std::size_t n) override {
    return cpu_.squared_distance(a, b, n);
  }
  double squared_norm(const float* a, std::size_t n) override { return cpu_.squared_norm(a, n); }

 private:
  compute::CpuBackend cpu_{1};
};

}  // namespace sgp::testing
