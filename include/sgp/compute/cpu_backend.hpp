#pragma once
#include "sgp/compute/backend.hpp"

namespace sgp::compute {

// The reference backend: GEMMs through OpenBLAS, everything else in plain C++ loops.
class CpuBackend final : public Backend {
 public:
  // blas_threads: OpenBLAS threads for this process (one per peer by default).
  explicit CpuBackend(int blas_threads = 1);

  DeviceKind kind() const override { return DeviceKind::cpu; }
  std::string describe() const override;

  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr) noexcept override;
  void* allocate_host(std::size_t bytes) override { return allocate(bytes); }
  void deallocate_host(void* ptr) noexcept override { deallocate(ptr); }
  void upload(void* dst, const void* src, std::size_t bytes) override;
  void download(void* dst, const void* src, std::size_t bytes) override;
  void copy(void* dst, const void* src, std::size_t bytes) override;
  void download_async(void* dst, const void* src, std::size_t bytes) override;
  void upload_async(void* dst, const void* src, std::size_t bytes) override;
  void wait_transfers() override {}
  void synchronize() override {}

  void gemm(Transpose trans_a, Transpose trans_b, int m, int n, int k, float alpha, const float* a,
            int lda, const float* b, int ldb, float beta, float* c, int ldc) override;

  void bias_activation_forward(float* y, const float* bias, int rows, int cols, bool relu,
                               float bias_scale) override;
  void relu_backward(float* dy, const float* y, std::size_t n) override;
  void bias_backward(const float* dy, int rows, int cols, float* db) override;
  double softmax_cross_entropy(const float* logits, const std::int32_t* labels, int rows, int cols,
                               float* dlogits) override;
  std::int64_t count_correct(const float* logits, const std::int32_t* labels, int rows,
                             int cols) override;
  void sgd_update(float* params, const float* grads, float* velocity, std::size_t n,
                  const SgdStep& step) override;
  void relu_forward(float* x, std::size_t n) override;
  void im2col(const float* x, const Window& w, float* cols) override;
  void col2im(const float* cols, const Window& w, float* dx) override;
  void max_pool_forward(const float* x, const Window& w, float* y, std::int32_t* argmax) override;
  void max_pool_backward(const float* dy, const std::int32_t* argmax, const Window& w,
                         float* dx) override;
  void avg_pool_forward(const float* x, const Window& w, float* y) override;
  void avg_pool_backward(const float* dy, const Window& w, float* dx) override;

  void fill(float* x, std::size_t n, float value) override;
  void scale(float* x, std::size_t n, float alpha) override;
  void axpy(float alpha, const float* x, float* y, std::size_t n) override;
  void debias(const float* x, double weight, float* z, std::size_t n) override;
  double squared_distance(const float* a, const float* b, std::size_t n) override;
  double squared_norm(const float* a, std::size_t n) override;

 private:
  int blas_threads_;
};

}  // namespace sgp::compute
