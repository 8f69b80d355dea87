#include "cuda_check.hpp"

#include <fmt/format.h>

#include "sgp/error.hpp"

namespace sgp::compute::detail {

void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  // Clears a non-sticky error so that the next check does not report it again.
  (void)cudaGetLastError();
  throw InvariantError(fmt::format("{}:{}: CUDA call {} failed: {}: {}", file, line, call,
                                   cudaGetErrorName(status), cudaGetErrorString(status)));
}

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  throw InvariantError(fmt::format("{}:{}: cuBLAS call {} failed: {}: {}", file, line, call,
                                   cublasGetStatusName(status), cublasGetStatusString(status)));
}

}  // namespace sgp::compute::detail
