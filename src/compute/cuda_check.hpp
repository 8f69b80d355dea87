#pragma once
// Checking CUDA runtime and cuBLAS status codes (compute module only). A failure throws
// sgp::InvariantError "file:line: <call> failed: <NAME>: <library's text>"; see cuda_backend.hpp
// for why InvariantError.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

namespace sgp::compute::detail {

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, const char* file,
                                   int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file,
                                     int line);

inline void check_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status != cudaSuccess) throw_cuda_error(status, call, file, line);
}
inline void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) throw_cublas_error(status, call, file, line);
}

}  // namespace sgp::compute::detail

#define SGP_CUDA_CHECK(call) ::sgp::compute::detail::check_cuda((call), #call, __FILE__, __LINE__)
#define SGP_CUBLAS_CHECK(call) \
  ::sgp::compute::detail::check_cublas((call), #call, __FILE__, __LINE__)
