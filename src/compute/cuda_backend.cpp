#include "sgp/compute/cuda_backend.hpp"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "column_major_gemm.hpp"
#include "cuda_check.hpp"
#include "kernels/elementwise.cuh"
#include "kernels/im2col.cuh"
#include "kernels/launch.cuh"
#include "kernels/pooling.cuh"
#include "kernels/reductions.cuh"
#include "kernels/softmax_cross_entropy.cuh"
#include "pool_check.hpp"
#include "sgp/error.hpp"

namespace sgp::compute {

namespace {

// Oldest architecture this build has code for (kernels/meson.build: sm_80, sm_90, compute_90).
constexpr int kMinMajor = 8;
// Resident 256-thread blocks per SM at full occupancy (2048 threads per SM on sm_80/sm_90).
constexpr int kBlocksPerSm = 8;

cublasOperation_t to_cublas(Transpose t) { return t == Transpose::yes ? CUBLAS_OP_T : CUBLAS_OP_N; }

// A device attribute, or 0 when the runtime cannot tell (only used for reported figures).
int attribute(cudaDeviceAttr attr, int device) {
  int value = 0;
  if (cudaDeviceGetAttribute(&value, attr, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return value;
}

}  // namespace

struct CudaBackend::State {
  int device = 0;
  bool allow_tf32 = false;
  cudaDeviceProp props{};
  cudaStream_t compute = nullptr;
  cudaStream_t transfer = nullptr;
  cudaEvent_t compute_mark = nullptr;  // recorded on compute, waited on by transfer
  cublasHandle_t blas = nullptr;
  double* partials = nullptr;                       // device, kMaxPartials
  kernels::ReductionResult* result = nullptr;       // device
  kernels::ReductionResult* host_result = nullptr;  // pinned host mirror of *result
  kernels::ReductionResult* host_loss = nullptr;    // pinned: the queued training loss
  struct {
    const std::int32_t* labels = nullptr;
    int rows = 0, cols = 0;
  } queued;  // the batch of the queued loss
  kernels::Launch launch;

  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  // Releases whatever was created, also after a half-finished constructor. Never throws.
  ~State() {
    // The compute stream is created first: without it nothing else exists, and cudaSetDevice
    // (which creates a context) is not worth calling.
    if (compute == nullptr) return;
    if (cudaSetDevice(device) != cudaSuccess) (void)cudaGetLastError();
    (void)cudaStreamSynchronize(compute);
    if (transfer) (void)cudaStreamSynchronize(transfer);
    if (blas) (void)cublasDestroy(blas);
    if (partials) (void)cudaFree(partials);
    if (result) (void)cudaFree(result);
    if (host_result) (void)cudaFreeHost(host_result);
    if (host_loss) (void)cudaFreeHost(host_loss);
    if (compute_mark) (void)cudaEventDestroy(compute_mark);
    if (transfer) (void)cudaStreamDestroy(transfer);
    (void)cudaStreamDestroy(compute);
    (void)cudaGetLastError();
  }

  // Makes this backend's device current on the calling thread (cheap when it already is).
  void activate() const {
    int current = -1;
    SGP_CUDA_CHECK(cudaGetDevice(&current));
    if (current != device) SGP_CUDA_CHECK(cudaSetDevice(device));
  }

  // Copies *result to the host and waits for the compute stream; returns the host copy.
  const kernels::ReductionResult& fetch_result() {
    SGP_CUDA_CHECK(cudaMemcpyAsync(host_result, result, sizeof(kernels::ReductionResult),
                                   cudaMemcpyDeviceToHost, compute));
    SGP_CUDA_CHECK(cudaStreamSynchronize(compute));
    return *host_result;
  }

  // Orders the transfer stream after all compute issued so far.
  void transfer_after_compute() {
    SGP_CUDA_CHECK(cudaEventRecord(compute_mark, compute));
    SGP_CUDA_CHECK(cudaStreamWaitEvent(transfer, compute_mark, 0));
  }
};

int CudaBackend::usable_device_count(std::string* why_not) {
  auto fail = [why_not](std::string reason) {
    if (why_not) *why_not = std::move(reason);
    return 0;
  };
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    int driver = 0;
    if (status == cudaErrorInsufficientDriver && cudaDriverGetVersion(&driver) == cudaSuccess &&
        driver == 0) {
      return fail(fmt::format("no NVIDIA driver is installed ({})", cudaGetErrorName(status)));
    }
    return fail(fmt::format("{} ({}; driver supports CUDA {}.{}, this build's runtime {}.{})",
                            cudaGetErrorString(status), cudaGetErrorName(status), driver / 1000,
                            driver % 1000 / 10, CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10));
  }
  if (count == 0) return fail("the CUDA runtime reports no device");
  // Devices 0..usable-1 must all run our kernels; stop at the first that cannot.
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp props{};
    const cudaError_t prop_status = cudaGetDeviceProperties(&props, d);
    std::string reason;
    if (prop_status != cudaSuccess) {
      (void)cudaGetLastError();
      reason = fmt::format("cuda:{}: {}", d, cudaGetErrorString(prop_status));
    } else if (props.major < kMinMajor) {
      reason = fmt::format("cuda:{} ({}) has compute capability {}.{}; this build needs {}.0+", d,
                           props.name, props.major, props.minor, kMinMajor);
    }
    if (!reason.empty()) return d > 0 ? d : fail(reason);
  }
  return count;
}

CudaBackend::CudaBackend(int device_index, bool allow_tf32) : state_(std::make_unique<State>()) {
  std::string why_not;
  const int count = usable_device_count(&why_not);
  SGP_ENFORCE(device_index >= 0 && device_index < count,
              "cuda:{} is not a usable device ({} usable{}{})", device_index, count,
              why_not.empty() ? "" : ": ", why_not);
  State& s = *state_;
  s.device = device_index;
  s.allow_tf32 = allow_tf32;
  SGP_CUDA_CHECK(cudaSetDevice(device_index));
  SGP_CUDA_CHECK(cudaGetDeviceProperties(&s.props, device_index));
  // Non-blocking: no implicit synchronisation with the legacy default stream.
  SGP_CUDA_CHECK(cudaStreamCreateWithFlags(&s.compute, cudaStreamNonBlocking));
  SGP_CUDA_CHECK(cudaStreamCreateWithFlags(&s.transfer, cudaStreamNonBlocking));
  SGP_CUDA_CHECK(cudaEventCreateWithFlags(&s.compute_mark, cudaEventDisableTiming));
  SGP_CUBLAS_CHECK(cublasCreate(&s.blas));
  SGP_CUBLAS_CHECK(cublasSetStream(s.blas, s.compute));
  SGP_CUBLAS_CHECK(
      cublasSetMathMode(s.blas, allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  SGP_CUDA_CHECK(
      cudaMalloc(reinterpret_cast<void**>(&s.partials), kernels::kMaxPartials * sizeof(double)));
  SGP_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&s.result), sizeof(kernels::ReductionResult)));
  SGP_CUDA_CHECK(
      cudaMallocHost(reinterpret_cast<void**>(&s.host_result), sizeof(kernels::ReductionResult)));
  SGP_CUDA_CHECK(
      cudaMallocHost(reinterpret_cast<void**>(&s.host_loss), sizeof(kernels::ReductionResult)));
  s.launch.stream = s.compute;
  s.launch.max_blocks = std::max(1, s.props.multiProcessorCount * kBlocksPerSm);
}

CudaBackend::~CudaBackend() = default;

std::string CudaBackend::describe() const {
  const State& s = *state_;
  return fmt::format("cuda:{} ({}, {:.0f} GiB, sm_{}{}, {} SMs, {} GEMMs)", s.device, s.props.name,
                     static_cast<double>(s.props.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0),
                     s.props.major, s.props.minor, s.props.multiProcessorCount,
                     s.allow_tf32 ? "TF32" : "fp32");
}

int CudaBackend::device_index() const { return state_->device; }

double CudaBackend::peak_memory_bandwidth() const {
  // cudaDeviceProp lost memoryClockRate in CUDA 13; the attribute remains (kHz, bits).
  const double clock_hz = attribute(cudaDevAttrMemoryClockRate, state_->device) * 1e3;
  const double bus_bytes = attribute(cudaDevAttrGlobalMemoryBusWidth, state_->device) / 8.0;
  return 2.0 * clock_hz * bus_bytes;  // double data rate
}

double CudaBackend::peak_fp32_flops() const {
  const cudaDeviceProp& p = state_->props;
  // FP32 lanes per SM: 64 on GA100 (sm_80), 128 on sm_86/87/89, Hopper and later.
  const int lanes = p.major < 8 ? 0 : (p.major == 8 && p.minor == 0 ? 64 : 128);
  const double clock_hz = attribute(cudaDevAttrClockRate, state_->device) * 1e3;
  return static_cast<double>(p.multiProcessorCount) * lanes * 2.0 * clock_hz;
}

// --- memory -------------------------------------------------------------------------------------

void* CudaBackend::allocate(std::size_t bytes) {
  state_->activate();
  void* ptr = nullptr;
  const cudaError_t status = cudaMalloc(&ptr, bytes);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    std::size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) (void)cudaGetLastError();
    throw InvariantError(
        fmt::format("{}:{}: cudaMalloc of {} bytes on cuda:{} failed: {}: {} ({} of {} MiB free)",
                    __FILE__, __LINE__, bytes, state_->device, cudaGetErrorName(status),
                    cudaGetErrorString(status), free_bytes >> 20, total_bytes >> 20));
  }
  return ptr;
}

void CudaBackend::deallocate(void* ptr) noexcept {
  if (!ptr) return;
  if (cudaSetDevice(state_->device) != cudaSuccess) (void)cudaGetLastError();
  const cudaError_t status = cudaFree(ptr);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    spdlog::error("cudaFree on cuda:{} failed: {}", state_->device, cudaGetErrorString(status));
  }
}

void* CudaBackend::allocate_host(std::size_t bytes) {
  state_->activate();
  void* ptr = nullptr;
  SGP_CUDA_CHECK(cudaMallocHost(&ptr, bytes));
  return ptr;
}

void CudaBackend::deallocate_host(void* ptr) noexcept {
  if (!ptr) return;
  // A transfer may still be using it.
  if (cudaStreamSynchronize(state_->transfer) != cudaSuccess) (void)cudaGetLastError();
  const cudaError_t status = cudaFreeHost(ptr);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    spdlog::error("cudaFreeHost failed: {}", cudaGetErrorString(status));
  }
}

// upload/download go through the compute stream, so they are ordered with the compute around
// them, and wait for it: the host buffer may be reused (or read) as soon as they return.
void CudaBackend::upload(void* device_dst, const void* host_src, std::size_t bytes) {
  if (bytes == 0) return;
  state_->activate();
  SGP_CUDA_CHECK(
      cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, state_->compute));
  SGP_CUDA_CHECK(cudaStreamSynchronize(state_->compute));
}

void CudaBackend::download(void* host_dst, const void* device_src, std::size_t bytes) {
  if (bytes == 0) return;
  state_->activate();
  SGP_CUDA_CHECK(
      cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, state_->compute));
  SGP_CUDA_CHECK(cudaStreamSynchronize(state_->compute));
}

void CudaBackend::copy(void* device_dst, const void* device_src, std::size_t bytes) {
  if (bytes == 0) return;
  state_->activate();
  SGP_CUDA_CHECK(
      cudaMemcpyAsync(device_dst, device_src, bytes, cudaMemcpyDeviceToDevice, state_->compute));
}

void CudaBackend::download_async(void* host_dst, const void* device_src, std::size_t bytes) {
  if (bytes == 0) return;
  state_->activate();
  state_->transfer_after_compute();
  SGP_CUDA_CHECK(
      cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, state_->transfer));
}

void CudaBackend::upload_async(void* device_dst, const void* host_src, std::size_t bytes) {
  if (bytes == 0) return;
  state_->activate();
  state_->transfer_after_compute();
  SGP_CUDA_CHECK(
      cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, state_->transfer));
}

void CudaBackend::wait_transfers() {
  state_->activate();
  SGP_CUDA_CHECK(cudaStreamSynchronize(state_->transfer));
}

void CudaBackend::synchronize() {
  state_->activate();
  SGP_CUDA_CHECK(cudaStreamSynchronize(state_->compute));
}

// --- dense linear algebra -----------------------------------------------------------------------

void CudaBackend::gemm(Transpose trans_a, Transpose trans_b, int m, int n, int k, float alpha,
                       const float* a, int lda, const float* b, int ldb, float beta, float* c,
                       int ldc) {
  state_->activate();
  const auto g = ColumnMajorGemm::from_row_major(trans_a, trans_b, m, n, k, a, lda, b, ldb);
  SGP_CUBLAS_CHECK(cublasSgemm(state_->blas, to_cublas(g.op_first), to_cublas(g.op_second), g.m,
                               g.n, g.k, &alpha, g.first, g.ld_first, g.second, g.ld_second, &beta,
                               c, ldc));
}

// --- neural-network operations ------------------------------------------------------------------

void CudaBackend::bias_activation_forward(float* y, const float* bias, int rows, int cols,
                                          bool relu, float bias_scale) {
  state_->activate();
  SGP_CUDA_CHECK(
      kernels::bias_activation_forward(y, bias, rows, cols, relu, bias_scale, state_->launch));
}

void CudaBackend::relu_backward(float* dy, const float* y, std::size_t n) {
  state_->activate();
  SGP_CUDA_CHECK(kernels::relu_backward(dy, y, n, state_->launch));
}

void CudaBackend::bias_backward(const float* dy, int rows, int cols, float* db) {
  state_->activate();
  SGP_CUDA_CHECK(kernels::column_sums(dy, rows, cols, db, state_->launch));
}

void CudaBackend::enqueue_softmax_cross_entropy(const float* logits, const std::int32_t* labels,
                                                int rows, int cols, float* dlogits) {
  SGP_ENFORCE(rows >= 1 && cols >= 1, "softmax_cross_entropy of a {} x {} batch", rows, cols);
  State& s = *state_;
  s.activate();
  SGP_CUDA_CHECK(cudaMemsetAsync(&s.result->first_bad_row, 0xFF, sizeof(unsigned int),
                                 s.compute));  // = kNoBadRow
  SGP_CUDA_CHECK(kernels::softmax_cross_entropy(logits, labels, rows, cols,
                                                1.0f / static_cast<float>(rows), dlogits,
                                                s.partials, s.result, s.launch));
}

double CudaBackend::mean_loss(const void* host_result, const std::int32_t* labels, int rows,
                              int cols) {
  const auto& r = *static_cast<const kernels::ReductionResult*>(host_result);
  if (r.first_bad_row != kernels::kNoBadRow) {
    const unsigned int row = r.first_bad_row;
    std::int32_t label = 0;
    download(&label, labels + row, sizeof(label));
    SGP_ENFORCE(label >= 0 && label < cols, "label {} of row {} outside 0..{}", label, row,
                cols - 1);
  }
  return r.value / rows;
}

double CudaBackend::softmax_cross_entropy(const float* logits, const std::int32_t* labels, int rows,
                                          int cols, float* dlogits) {
  enqueue_softmax_cross_entropy(logits, labels, rows, cols, dlogits);
  return mean_loss(&state_->fetch_result(), labels, rows, cols);
}

// The copy of the result is queued behind the kernel on the compute stream, into its own pinned
// slot: reductions enqueued later reuse *result and host_result without touching it.
void CudaBackend::queue_softmax_cross_entropy(const float* logits, const std::int32_t* labels,
                                              int rows, int cols, float* dlogits) {
  enqueue_softmax_cross_entropy(logits, labels, rows, cols, dlogits);
  State& s = *state_;
  SGP_CUDA_CHECK(cudaMemcpyAsync(s.host_loss, s.result, sizeof(kernels::ReductionResult),
                                 cudaMemcpyDeviceToHost, s.compute));
  s.queued = {labels, rows, cols};
}

double CudaBackend::queued_loss() {
  State& s = *state_;
  SGP_ENFORCE(s.queued.rows > 0, "queued_loss with no queued softmax_cross_entropy");
  synchronize();
  return mean_loss(s.host_loss, s.queued.labels, s.queued.rows, s.queued.cols);
}

std::int64_t CudaBackend::count_correct(const float* logits, const std::int32_t* labels, int rows,
                                        int cols) {
  State& s = *state_;
  s.activate();
  SGP_CUDA_CHECK(cudaMemsetAsync(&s.result->count, 0, sizeof(unsigned long long), s.compute));
  SGP_CUDA_CHECK(kernels::count_correct(logits, labels, rows, cols, s.result, s.launch));
  return static_cast<std::int64_t>(s.fetch_result().count);
}

void CudaBackend::sgd_update(float* params, const float* grads, float* velocity, std::size_t n,
                             const SgdStep& step) {
  state_->activate();
  SGP_CUDA_CHECK(kernels::sgd_update(params, grads, velocity, n, step.lr, step.momentum,
                                     step.weight_decay, step.nesterov, state_->launch));
}

void CudaBackend::relu_forward(float* x, std::size_t n) {
  state_->activate();
  SGP_CUDA_CHECK(kernels::relu_forward(x, n, state_->launch));
}

// --- convolution and pooling --------------------------------------------------------------------

void CudaBackend::im2col(const float* x, const Window& w, float* cols) {
  state_->activate();
  SGP_CUDA_CHECK(kernels::im2col(x, w, cols, state_->launch));
}

void CudaBackend::col2im(const float* cols, const Window& w, float* dx) {
  state_->activate();
  SGP_CUDA_CHECK(kernels::col2im(cols, w, dx, state_->launch));
}

void CudaBackend::max_pool_forward(const float* x, const Window& w, float* y,
                                   std::int32_t* argmax) {
  check_pool(w);
  state_->activate();
  SGP_CUDA_CHECK(kernels::max_pool_forward(x, w, y, argmax, state_->launch));
}

void CudaBackend::max_pool_backward(const float* dy, const std::int32_t* argmax, const Window& w,
                                    float* dx) {
  check_pool(w);
  state_->activate();
  SGP_CUDA_CHECK(kernels::max_pool_backward(dy, argmax, w, dx, state_->launch));
}

void CudaBackend::avg_pool_forward(const float* x, const Window& w, float* y) {
  check_pool(w);
  state_->activate();
  SGP_CUDA_CHECK(kernels::avg_pool_forward(x, w, y, state_->launch));
}

void CudaBackend::avg_pool_backward(const float* dy, const Window& w, float* dx) {
  check_pool(w);
  state_->activate();
  SGP_CUDA_CHECK(kernels::avg_pool_backward(dy, w, dx, state_->launch));
}

// --- vector arithmetic (push-sum) ---------------------------------------------------------------

void CudaBackend::fill(float* x, std::size_t n, float value) {
  state_->activate();
  SGP_CUDA_CHECK(kernels::fill(x, n, value, state_->launch));
}

void CudaBackend::scale(float* x, std::size_t n, float alpha) {
  state_->activate();
  SGP_CUDA_CHECK(kernels::scale(x, n, alpha, state_->launch));
}

void CudaBackend::axpy(float alpha, const float* x, float* y, std::size_t n) {
  state_->activate();
  SGP_CUDA_CHECK(kernels::axpy(alpha, x, y, n, state_->launch));
}

void CudaBackend::debias(const float* x, double weight, float* z, std::size_t n) {
  SGP_ENFORCE(weight > 0.0 && std::isfinite(weight), "push-sum weight must be positive, got {}",
              weight);
  state_->activate();
  // Same rounding as the CPU backend: one float reciprocal, then a multiply per element.
  SGP_CUDA_CHECK(kernels::debias(x, static_cast<float>(1.0 / weight), z, n, state_->launch));
}

double CudaBackend::squared_distance(const float* a, const float* b, std::size_t n) {
  State& s = *state_;
  s.activate();
  SGP_CUDA_CHECK(kernels::squared_distance(a, b, n, s.partials, &s.result->value, s.launch));
  return s.fetch_result().value;
}

double CudaBackend::squared_norm(const float* a, std::size_t n) {
  State& s = *state_;
  s.activate();
  SGP_CUDA_CHECK(kernels::squared_distance(a, nullptr, n, s.partials, &s.result->value, s.launch));
  return s.fetch_result().value;
}

}  // namespace sgp::compute
