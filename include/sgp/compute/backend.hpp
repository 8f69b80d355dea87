#pragma once
// The compute interface: device memory and every numeric operation the model, the optimizer and
// the push-sum engine need. Two backends implement it: CpuBackend (OpenBLAS + plain C++) and
// CudaBackend (cuBLAS + kernels/). Pointers passed to these methods live in the backend's memory
// (host memory for the CPU backend, device memory for CUDA), except where a name says "host".
//
// Matrices are row-major. Operations are ordered on the backend's compute stream; methods that
// return a value to the host (softmax_cross_entropy, count_correct, the reductions) synchronise.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "sgp/compute/window.hpp"

namespace sgp::compute {

enum class DeviceKind { cpu, cuda };

enum class Transpose { no, yes };

// One fused SGD step (PyTorch semantics, dampening 0):
//   g = grad + weight_decay * param;  v = momentum * v + g;
//   param -= lr * (nesterov ? g + momentum * v : v)
struct SgdStep {
  float lr = 0.1f;
  float momentum = 0.0f;
  float weight_decay = 0.0f;
  bool nesterov = false;
};

class Backend {
 public:
  virtual ~Backend() = default;
  Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  virtual DeviceKind kind() const = 0;
  // One line for logs, e.g. "cpu (OpenBLAS, 1 thread)" or "cuda:0 (NVIDIA H100, 80 GiB)".
  virtual std::string describe() const = 0;

  // --- memory ---------------------------------------------------------------------------------
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void deallocate(void* ptr) noexcept = 0;
  // Host memory suited to transfers (pinned on CUDA; plain on CPU).
  virtual void* allocate_host(std::size_t bytes) = 0;
  virtual void deallocate_host(void* ptr) noexcept = 0;
  virtual void upload(void* device_dst, const void* host_src, std::size_t bytes) = 0;
  virtual void download(void* host_dst, const void* device_src, std::size_t bytes) = 0;
  virtual void copy(void* device_dst, const void* device_src, std::size_t bytes) = 0;
  // Transfers on the backend's own transfer stream, so they can overlap compute; they are ordered
  // after all compute issued before the call. wait_transfers() blocks until all have finished;
  // it may be called from any thread (push-sum's communication thread waits there for a send's
  // download). The CPU backend performs them at once.
  virtual void download_async(void* host_dst, const void* device_src, std::size_t bytes) = 0;
  virtual void upload_async(void* device_dst, const void* host_src, std::size_t bytes) = 0;
  virtual void wait_transfers() = 0;
  // Blocks until all issued compute has finished.
  virtual void synchronize() = 0;

  // --- dense linear algebra -------------------------------------------------------------------
  // C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C[m,n], all row-major with leading dims.
  virtual void gemm(Transpose trans_a, Transpose trans_b, int m, int n, int k, float alpha,
                    const float* a, int lda, const float* b, int ldb, float beta, float* c,
                    int ldc) = 0;

  // --- neural-network operations ---------------------------------------------------------------
  // y[r,c] += bias_scale * bias[c]; then, if relu, y = max(y, 0). (bias_scale: parameters kept
  // scaled, as push-sum's x = w * z; 1 leaves the sum bit for bit as y + bias.)
  virtual void bias_activation_forward(float* y, const float* bias, int rows, int cols, bool relu,
                                       float bias_scale) = 0;
  // dy[i] = y[i] > 0 ? dy[i] : 0  (y is the ReLU output of the forward pass).
  virtual void relu_backward(float* dy, const float* y, std::size_t n) = 0;
  // db[c] = sum_r dy[r,c].
  virtual void bias_backward(const float* dy, int rows, int cols, float* db) = 0;
  // Mean softmax cross-entropy of logits[rows, cols] against labels[rows] (in 0..cols-1).
  // If dlogits is not null it receives the gradient of the mean loss: (softmax - onehot) / rows.
  virtual double softmax_cross_entropy(const float* logits, const std::int32_t* labels, int rows,
                                       int cols, float* dlogits) = 0;
  // softmax_cross_entropy for a training step: enqueued only; queued_loss() reads the loss (and
  // checks the labels) later, so that a GPU runs forward and backward without a host round trip
  // in between. The default computes at once.
  virtual void queue_softmax_cross_entropy(const float* logits, const std::int32_t* labels,
                                           int rows, int cols, float* dlogits) {
    queued_loss_ = softmax_cross_entropy(logits, labels, rows, cols, dlogits);
  }
  // The mean loss of the last queue_softmax_cross_entropy; waits for the work enqueued so far.
  virtual double queued_loss() { return queued_loss_; }
  // Number of rows whose arg-max equals the label.
  virtual std::int64_t count_correct(const float* logits, const std::int32_t* labels, int rows,
                                     int cols) = 0;
  virtual void sgd_update(float* params, const float* grads, float* velocity, std::size_t n,
                          const SgdStep& step) = 0;
  // x = max(x, 0), in place (a ReLU that no preceding bias_activation_forward applied).
  virtual void relu_forward(float* x, std::size_t n) = 0;

  // --- convolution and pooling over NHWC image batches (geometry: window.hpp) ------------------
  // cols [positions x patch]: cols[(b, oy, ox), (ky, kx, c)] = x[b, oy*s - p + ky, ox*s - p + kx,
  // c], 0 where that falls in the padding. A convolution is then one GEMM with the weights.
  virtual void im2col(const float* x, const Window& w, float* cols) = 0;
  // The adjoint of im2col: dx[i] = sum of the cols entries that im2col read from x[i].
  // Overwrites dx (input_size() elements).
  virtual void col2im(const float* cols, const Window& w, float* dx) = 0;
  // Pooling needs padding 0. y [positions x channels] = maximum over each window; argmax[o]
  // receives the index into x of the maximum (the first one on ties).
  virtual void max_pool_forward(const float* x, const Window& w, float* y,
                                std::int32_t* argmax) = 0;
  // dx = 0, then dx[argmax[o]] += dy[o] for every output o. Overwrites dx.
  virtual void max_pool_backward(const float* dy, const std::int32_t* argmax, const Window& w,
                                 float* dx) = 0;
  // y = mean of each window's kernel * kernel entries.
  virtual void avg_pool_forward(const float* x, const Window& w, float* y) = 0;
  // dx[i] = sum over the windows containing x[i] of dy / (kernel * kernel). Overwrites dx.
  virtual void avg_pool_backward(const float* dy, const Window& w, float* dx) = 0;

  // --- vector arithmetic (push-sum) ------------------------------------------------------------
  virtual void fill(float* x, std::size_t n, float value) = 0;
  virtual void scale(float* x, std::size_t n, float alpha) = 0;                     // x *= alpha
  virtual void axpy(float alpha, const float* x, float* y, std::size_t n) = 0;      // y += alpha x
  virtual void debias(const float* x, double weight, float* z, std::size_t n) = 0;  // z = x / w
  virtual double squared_distance(const float* a, const float* b, std::size_t n) = 0;  // |a-b|^2
  virtual double squared_norm(const float* a, std::size_t n) = 0;                      // |a|^2

 private:
  double queued_loss_ = 0.0;
};

}  // namespace sgp::compute
