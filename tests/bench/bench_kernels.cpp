// Benchmark of the CUDA backend on the W2 workload (an MLP 784-4096-4096-4096-10, batch 256; see
// kWidths and kBatch below): `meson test -C <build>
// --benchmark kernels`. Prints figures, asserts nothing; without a usable GPU it says so, exits 0.
//
// Figures, defined before they are printed:
//   time       median over 7 samples of (several calls, then a stream synchronisation) / calls;
//              calls that return a value (the reductions) synchronise on each call, as a caller
//              of the backend sees them.
//   GB/s       bytes the operation must move (each vector read or written once) / time.
//   peak GB/s  2 x memory clock x bus width / 8, from the device attributes.
//   TFLOP/s    2 m n k / time for one GEMM; for a training step, the sum over its GEMMs / time.
//   FP32 peak  SMs x FP32 lanes per SM x 2 x clock (non-tensor; TF32 tensor cores go beyond it).
//   cuBLAS alone: the same cublasSgemm call on a fresh handle and stream, outside the backend.
//   % of the step: time cuBLAS alone needs for the step's GEMMs / time of the whole step
//              (forward, backward, loss, SGD update) through the backend.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <random>
#include <span>
#include <vector>

#include <fmt/format.h>

#include "sgp/compute/cuda_backend.hpp"
#include "sgp/compute/device_buffer.hpp"
#include "sgp/model/mlp.hpp"
#include "sgp/model/sgd.hpp"
#include "src/compute/column_major_gemm.hpp"
#include "src/compute/cuda_check.hpp"

using namespace sgp::compute;

namespace {

constexpr int kBatch = 256;
const std::vector<int> kWidths = {784, 4096, 4096, 4096, 10};

// Median seconds per call of `call`; `sync` waits for the work it issued.
double median_seconds(const std::function<void()>& call, const std::function<void()>& sync,
                      int calls_per_sample) {
  call();  // warm-up (cuBLAS picks its kernels, caches fill)
  sync();
  std::vector<double> samples;
  for (int s = 0; s < 7; ++s) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls_per_sample; ++i) call();
    sync();
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    samples.push_back(elapsed.count() / calls_per_sample);
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

void bench_mixing(CudaBackend& gpu, std::size_t n) {
  const double peak = gpu.peak_memory_bandwidth();
  fmt::print("\nmixing kernels, n = {} floats ({:.1f} MB per vector); peak DRAM {:.0f} GB/s\n", n,
             n * 4e-6, peak * 1e-9);
  // "of copy": against the device-to-device copy measured first, the bandwidth a kernel can
  // actually reach (the attribute peak is never reached).
  fmt::print("{:<18} {:>10} {:>10} {:>8} {:>8}\n", "operation", "time us", "GB/s", "of peak",
             "of copy");
  DeviceBuffer<float> x(gpu, n), y(gpu, n), z(gpu, n), g(gpu, n), v(gpu, n);
  for (auto* buffer : {&x, &y, &z, &g, &v}) gpu.fill(buffer->data(), n, 0.5f);
  const auto sync = [&] { gpu.synchronize(); };
  const double bytes = 4.0 * static_cast<double>(n);
  const SgdStep step{1e-6f, 0.9f, 1e-4f, true};
  struct Op {
    const char* name;
    double bytes;
    std::function<void()> call;
  };
  const std::vector<Op> ops = {
      {"copy (memcpy D2D)", 2 * bytes, [&] { gpu.copy(y.data(), x.data(), x.bytes()); }},
      {"fill", bytes, [&] { gpu.fill(z.data(), n, 1.0f); }},
      {"scale", 2 * bytes, [&] { gpu.scale(x.data(), n, 1.0f); }},
      {"axpy", 3 * bytes, [&] { gpu.axpy(1e-3f, x.data(), y.data(), n); }},
      {"debias", 2 * bytes, [&] { gpu.debias(x.data(), 0.5, z.data(), n); }},
      {"squared_distance", 2 * bytes, [&] { (void)gpu.squared_distance(x.data(), y.data(), n); }},
      {"squared_norm", bytes, [&] { (void)gpu.squared_norm(x.data(), n); }},
      {"sgd_update", 5 * bytes, [&] { gpu.sgd_update(x.data(), g.data(), v.data(), n, step); }},
  };
  double copy_rate = 0.0;
  for (const Op& op : ops) {
    const double seconds = median_seconds(op.call, sync, 20);
    const double rate = op.bytes / seconds;
    if (copy_rate == 0.0) copy_rate = rate;
    fmt::print("{:<18} {:>10.1f} {:>10.0f} {:>7.0f}% {:>7.0f}%\n", op.name, seconds * 1e6,
               rate * 1e-9, 100.0 * rate / peak, 100.0 * rate / copy_rate);
  }
}

struct GemmShape {
  const char* what;
  int layer;
  Transpose ta, tb;
  int m, n, k, lda, ldb, ldc;
};

// The GEMMs of one W2 training step, as sgp::model::Mlp issues them.
std::vector<GemmShape> w2_gemms() {
  std::vector<GemmShape> shapes;
  for (int l = 0; l + 1 < static_cast<int>(kWidths.size()); ++l) {
    const int in = kWidths[l], out = kWidths[l + 1];
    shapes.push_back({"forward", l, Transpose::no, Transpose::yes, kBatch, out, in, in, in, out});
    shapes.push_back({"dW", l, Transpose::yes, Transpose::no, out, in, kBatch, out, in, in});
    if (l > 0) {
      shapes.push_back({"dX", l, Transpose::no, Transpose::no, kBatch, in, out, out, in, in});
    }
  }
  return shapes;
}

// Returns the seconds cuBLAS alone takes for all the GEMMs of one step.
double bench_gemms(bool tf32) {
  CudaBackend gpu(0, tf32);
  fmt::print("\nW2 GEMMs (batch {}), {} math; FP32 non-tensor peak {:.1f} TFLOP/s\n", kBatch,
             tf32 ? "TF32 tensor-core" : "fp32", gpu.peak_fp32_flops() * 1e-12);
  fmt::print("{:<8} {:>5} {:>17} {:>11} {:>13} {:>8}\n", "gemm", "layer", "m x n x k", "ours TF/s",
             "cuBLAS TF/s", "ratio");
  cudaStream_t stream = nullptr;
  cublasHandle_t handle = nullptr;
  SGP_CUDA_CHECK(cudaSetDevice(gpu.device_index()));
  SGP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  SGP_CUBLAS_CHECK(cublasCreate(&handle));
  SGP_CUBLAS_CHECK(cublasSetStream(handle, stream));
  SGP_CUBLAS_CHECK(
      cublasSetMathMode(handle, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  const std::size_t largest = static_cast<std::size_t>(4096) * 4096;
  DeviceBuffer<float> a(gpu, largest), b(gpu, largest), c(gpu, largest);
  for (auto* buffer : {&a, &b, &c}) gpu.fill(buffer->data(), largest, 0.01f);
  double ours_total = 0.0, alone_total = 0.0, flops_total = 0.0;
  for (const GemmShape& s : w2_gemms()) {
    const float alpha = 1.0f, beta = 0.0f;
    const auto ours = [&] {
      gpu.gemm(s.ta, s.tb, s.m, s.n, s.k, alpha, a.data(), s.lda, b.data(), s.ldb, beta, c.data(),
               s.ldc);
    };
    // The same cuBLAS call as the backend's (src/compute/column_major_gemm.hpp).
    const auto g = ColumnMajorGemm::from_row_major(s.ta, s.tb, s.m, s.n, s.k, a.data(), s.lda,
                                                   b.data(), s.ldb);
    const auto alone = [&] {
      SGP_CUBLAS_CHECK(cublasSgemm(handle, g.op_first == Transpose::yes ? CUBLAS_OP_T : CUBLAS_OP_N,
                                   g.op_second == Transpose::yes ? CUBLAS_OP_T : CUBLAS_OP_N, g.m,
                                   g.n, g.k, &alpha, g.first, g.ld_first, g.second, g.ld_second,
                                   &beta, c.data(), s.ldc));
    };
    const double t_ours = median_seconds(
        ours, [&] { gpu.synchronize(); }, 10);
    const double t_alone = median_seconds(
        alone, [&] { SGP_CUDA_CHECK(cudaStreamSynchronize(stream)); }, 10);
    const double flops = 2.0 * s.m * s.n * s.k;
    ours_total += t_ours;
    alone_total += t_alone;
    flops_total += flops;
    fmt::print("{:<8} {:>5} {:>17} {:>11.1f} {:>13.1f} {:>7.0f}%\n", s.what, s.layer,
               fmt::format("{}x{}x{}", s.m, s.n, s.k), flops / t_ours * 1e-12,
               flops / t_alone * 1e-12, 100.0 * t_alone / t_ours);
  }
  fmt::print("{:<8} {:>5} {:>17} {:>11.1f} {:>13.1f} {:>7.0f}%\n", "all", "", "",
             flops_total / ours_total * 1e-12, flops_total / alone_total * 1e-12,
             100.0 * alone_total / ours_total);
  SGP_CUBLAS_CHECK(cublasDestroy(handle));
  SGP_CUDA_CHECK(cudaStreamDestroy(stream));
  return alone_total;
}

// gemms_alone: bench_gemms' seconds for the step's GEMMs done by cuBLAS alone.
void bench_step(bool tf32, double gemms_alone) {
  CudaBackend gpu(0, tf32);
  sgp::model::Mlp mlp(gpu, kWidths, kBatch);
  const std::vector<float> host_params = mlp.initial_parameters(1);
  DeviceBuffer<float> params(gpu, std::span<const float>(host_params));
  DeviceBuffer<float> grads(gpu, params.size());
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> host_inputs(static_cast<std::size_t>(kBatch) * kWidths.front());
  for (auto& value : host_inputs) value = normal(rng);
  std::vector<std::int32_t> host_labels(kBatch);
  for (auto& label : host_labels) label = static_cast<std::int32_t>(rng() % 10);
  DeviceBuffer<float> inputs(gpu, std::span<const float>(host_inputs));
  DeviceBuffer<std::int32_t> labels(gpu, std::span<const std::int32_t>(host_labels));
  sgp::model::Sgd sgd(gpu, params.size(), {});
  double step_flops = 0.0;
  for (const GemmShape& s : w2_gemms()) step_flops += 2.0 * s.m * s.n * s.k;
  const auto step = [&] {
    (void)mlp.forward_backward(params.data(), inputs.data(), labels.data(), kBatch, grads.data());
    sgd.step(params.data(), grads.data(), 1e-3f);
  };
  const double seconds = median_seconds(
      step, [&] { gpu.synchronize(); }, 5);
  fmt::print(
      "\nW2 local step ({} parameters, batch {}, {}): {:.3f} ms, GEMMs {:.1f} TFLOP/s; the same "
      "GEMMs by cuBLAS alone: {:.3f} ms = {:.0f}% of the step\n",
      params.size(), kBatch, tf32 ? "TF32" : "fp32", seconds * 1e3, step_flops / seconds * 1e-12,
      gemms_alone * 1e3, 100.0 * gemms_alone / seconds);
}

}  // namespace

int main() {
  std::string why_not;
  if (CudaBackend::usable_device_count(&why_not) == 0) {
    fmt::print("bench_kernels: no GPU: {}; nothing measured\n", why_not);
    return 0;
  }
  try {
    CudaBackend gpu(0, false);
    fmt::print("device: {}\n", gpu.describe());
    std::size_t w2_parameters = 0;
    {
      sgp::model::Mlp mlp(gpu, kWidths, 1);
      w2_parameters = mlp.parameter_count();
    }
    bench_mixing(gpu, w2_parameters);
    const double gemms_fp32 = bench_gemms(false), gemms_tf32 = bench_gemms(true);
    bench_step(false, gemms_fp32);
    bench_step(true, gemms_tf32);
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_kernels: {}\n", e.what());
    return 1;
  }
  return 0;
}
