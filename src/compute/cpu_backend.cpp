#include "sgp/compute/cpu_backend.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include <fmt/format.h>

#include "sgp/compute/blas_kernels.hpp"
#include "sgp/error.hpp"

namespace sgp::compute {

namespace {
constexpr std::size_t kAlignment = 64;  // one cache line; also what AVX-512 loads like

CBLAS_TRANSPOSE to_cblas(Transpose t) { return t == Transpose::yes ? CblasTrans : CblasNoTrans; }
}  // namespace

CpuBackend::CpuBackend(int blas_threads) : blas_threads_(blas_threads) {
  SGP_ENFORCE(blas_threads >= 1, "blas_threads must be >= 1, got {}", blas_threads);
  openblas_set_num_threads(blas_threads);
}

std::string CpuBackend::describe() const {
  return fmt::format("cpu (OpenBLAS {} kernels, {} thread{})", blas_core_name(), blas_threads_,
                     blas_threads_ == 1 ? "" : "s");
}

void* CpuBackend::allocate(std::size_t bytes) {
  const std::size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* ptr = std::aligned_alloc(kAlignment, std::max(rounded, kAlignment));
  if (!ptr) throw std::bad_alloc();
  return ptr;
}

void CpuBackend::deallocate(void* ptr) noexcept { std::free(ptr); }

void CpuBackend::upload(void* dst, const void* src, std::size_t bytes) {
  std::memcpy(dst, src, bytes);
}
void CpuBackend::download(void* dst, const void* src, std::size_t bytes) {
  std::memcpy(dst, src, bytes);
}
void CpuBackend::copy(void* dst, const void* src, std::size_t bytes) {
  std::memmove(dst, src, bytes);
}
void CpuBackend::download_async(void* dst, const void* src, std::size_t bytes) {
  std::memcpy(dst, src, bytes);
}
void CpuBackend::upload_async(void* dst, const void* src, std::size_t bytes) {
  std::memcpy(dst, src, bytes);
}

void CpuBackend::gemm(Transpose trans_a, Transpose trans_b, int m, int n, int k, float alpha,
                      const float* a, int lda, const float* b, int ldb, float beta, float* c,
                      int ldc) {
  cblas_sgemm(CblasRowMajor, to_cblas(trans_a), to_cblas(trans_b), m, n, k, alpha, a, lda, b, ldb,
              beta, c, ldc);
}

void CpuBackend::bias_activation_forward(float* y, const float* bias, int rows, int cols, bool relu,
                                         float bias_scale) {
  for (int r = 0; r < rows; ++r) {
    float* row = y + static_cast<std::size_t>(r) * cols;
    if (relu) {
      for (int c = 0; c < cols; ++c) row[c] = std::max(row[c] + bias_scale * bias[c], 0.0f);
    } else {
      for (int c = 0; c < cols; ++c) row[c] += bias_scale * bias[c];
    }
  }
}

void CpuBackend::relu_backward(float* dy, const float* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

void CpuBackend::bias_backward(const float* dy, int rows, int cols, float* db) {
  std::fill(db, db + cols, 0.0f);
  for (int r = 0; r < rows; ++r) {
    const float* row = dy + static_cast<std::size_t>(r) * cols;
    for (int c = 0; c < cols; ++c) db[c] += row[c];
  }
}

double CpuBackend::softmax_cross_entropy(const float* logits, const std::int32_t* labels, int rows,
                                         int cols, float* dlogits) {
  double total = 0.0;
  const float inv_rows = 1.0f / static_cast<float>(rows);
  for (int r = 0; r < rows; ++r) {
    const float* row = logits + static_cast<std::size_t>(r) * cols;
    const int label = labels[r];
    SGP_ENFORCE(label >= 0 && label < cols, "label {} of row {} outside 0..{}", label, r, cols - 1);
    const float max = *std::max_element(row, row + cols);
    double sum = 0.0;
    for (int c = 0; c < cols; ++c) sum += std::exp(static_cast<double>(row[c] - max));
    total += std::log(sum) + max - row[label];
    if (dlogits) {
      float* grad = dlogits + static_cast<std::size_t>(r) * cols;
      const double inv_sum = 1.0 / sum;
      for (int c = 0; c < cols; ++c) {
        const float p = static_cast<float>(std::exp(static_cast<double>(row[c] - max)) * inv_sum);
        grad[c] = (p - (c == label ? 1.0f : 0.0f)) * inv_rows;
      }
    }
  }
  return total / rows;
}

std::int64_t CpuBackend::count_correct(const float* logits, const std::int32_t* labels, int rows,
                                       int cols) {
  std::int64_t correct = 0;
  for (int r = 0; r < rows; ++r) {
    const float* row = logits + static_cast<std::size_t>(r) * cols;
    correct += (std::max_element(row, row + cols) - row) == labels[r];
  }
  return correct;
}

void CpuBackend::sgd_update(float* params, const float* grads, float* velocity, std::size_t n,
                            const SgdStep& s) {
  const float lr = s.lr, mu = s.momentum, wd = s.weight_decay;
  if (s.nesterov) {
    for (std::size_t i = 0; i < n; ++i) {
      const float g = grads[i] + wd * params[i];
      const float v = mu * velocity[i] + g;
      velocity[i] = v;
      params[i] -= lr * (g + mu * v);
    }
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      const float g = grads[i] + wd * params[i];
      const float v = mu * velocity[i] + g;
      velocity[i] = v;
      params[i] -= lr * v;
    }
  }
}

void CpuBackend::fill(float* x, std::size_t n, float value) { std::fill(x, x + n, value); }

void CpuBackend::scale(float* x, std::size_t n, float alpha) {
  for (std::size_t i = 0; i < n; ++i) x[i] *= alpha;
}

void CpuBackend::axpy(float alpha, const float* x, float* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

void CpuBackend::debias(const float* x, double weight, float* z, std::size_t n) {
  SGP_ENFORCE(weight > 0.0 && std::isfinite(weight), "push-sum weight must be positive, got {}",
              weight);
  const float inv = static_cast<float>(1.0 / weight);
  for (std::size_t i = 0; i < n; ++i) z[i] = x[i] * inv;
}

double CpuBackend::squared_distance(const float* a, const float* b, std::size_t n) {
  double sum = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    sum += d * d;
  }
  return sum;
}

double CpuBackend::squared_norm(const float* a, std::size_t n) {
  double sum = 0.0;
  for (std::size_t i = 0; i < n; ++i) sum += static_cast<double>(a[i]) * a[i];
  return sum;
}

}  // namespace sgp::compute
