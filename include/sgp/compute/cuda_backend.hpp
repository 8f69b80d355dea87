#pragma once
// The CUDA backend: GEMMs through cuBLAS, everything else through our kernels (kernels/*.cu).
//
// Streams: all compute (kernels, cuBLAS, copy(), the blocking upload()/download()) runs in order
// on one compute stream. download_async/upload_async run on a second, transfer stream; each is
// ordered after all compute issued before it (an event), but compute issued AFTER it is not
// ordered after the transfer: call wait_transfers() before compute touches the buffers involved.
// Host buffers for the async transfers should come from allocate_host() (pinned memory),
// otherwise the copies cannot overlap anything.
//
// Errors: every CUDA runtime and cuBLAS call is checked. A failure throws sgp::InvariantError
// whose message holds file:line, the call, and the library's own name and text for the error
// (cudaGetErrorName/cudaGetErrorString, cublasGetStatusName/String). InvariantError, not IoError,
// because IoError means "recoverable, carry on without that peer": a failed CUDA call (out of
// device memory, a sticky launch failure) leaves this process unable to continue its computation.
// Kernel faults surface asynchronously, at the next call that synchronises.
//
// One backend is used by one host thread at a time (the usual one-backend-per-peer); every call
// makes its device current on the calling thread first, so the thread need not care.
#include <memory>
#include <string>

#include "sgp/compute/backend.hpp"

namespace sgp::compute {

class CudaBackend final : public Backend {
 public:
  // device_index: 0-based CUDA device (must be < usable_device_count()). allow_tf32: let cuBLAS
  // use TF32 tensor cores for the fp32 GEMMs (faster; about 3 decimal digits per product).
  CudaBackend(int device_index, bool allow_tf32);
  ~CudaBackend() override;

  // Number of usable CUDA devices; devices 0..count-1 are all usable. When 0, `why_not` (if not
  // null) receives the reason, e.g. the CUDA runtime's message. Never throws.
  static int usable_device_count(std::string* why_not);

  DeviceKind kind() const override { return DeviceKind::cuda; }
  std::string describe() const override;

  int device_index() const;
  // Peak DRAM bandwidth in bytes/s from the device attributes (2 x memory clock x bus width).
  double peak_memory_bandwidth() const;
  // Peak non-tensor FP32 rate in FLOP/s: SMs x FP32 lanes per SM (by architecture) x 2 x clock.
  // Approximate (boost clock); 0 for an architecture this build does not know.
  double peak_fp32_flops() const;

  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr) noexcept override;
  void* allocate_host(std::size_t bytes) override;
  void deallocate_host(void* ptr) noexcept override;
  void upload(void* device_dst, const void* host_src, std::size_t bytes) override;
  void download(void* host_dst, const void* device_src, std::size_t bytes) override;
  void copy(void* device_dst, const void* device_src, std::size_t bytes) override;
  void download_async(void* host_dst, const void* device_src, std::size_t bytes) override;
  void upload_async(void* device_dst, const void* host_src, std::size_t bytes) override;
  void wait_transfers() override;
  void synchronize() override;

  void gemm(Transpose trans_a, Transpose trans_b, int m, int n, int k, float alpha, const float* a,
            int lda, const float* b, int ldb, float beta, float* c, int ldc) override;

  void bias_activation_forward(float* y, const float* bias, int rows, int cols, bool relu,
                               float bias_scale) override;
  void relu_backward(float* dy, const float* y, std::size_t n) override;
  void bias_backward(const float* dy, int rows, int cols, float* db) override;
  double softmax_cross_entropy(const float* logits, const std::int32_t* labels, int rows, int cols,
                               float* dlogits) override;
  void queue_softmax_cross_entropy(const float* logits, const std::int32_t* labels, int rows,
                                   int cols, float* dlogits) override;
  double queued_loss() override;
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
  struct State;  // CUDA handles; keeps CUDA headers out of this header
  // Enqueues the loss kernel; its result lands in *result on the device.
  void enqueue_softmax_cross_entropy(const float* logits, const std::int32_t* labels, int rows,
                                     int cols, float* dlogits);
  // The mean loss from a copy of *result, after naming the first bad label if there was one.
  double mean_loss(const void* host_result, const std::int32_t* labels, int rows, int cols);
  std::unique_ptr<State> state_;
};

}  // namespace sgp::compute
