#pragma once
// The boundary between the core and the CUDA backend module (libsgp_cuda.so, compute module
// only). The module holds CudaBackend, our kernels and the links to cuBLAS and the CUDA runtime;
// the core opens it with dlopen only when a run asks for a GPU (cuda_loader.cpp), so that a
// process that runs on the CPU never maps those libraries (about 150 MiB resident each).
//
// The module exports one extern "C" symbol, kCudaModuleEntry, returning its CudaModuleApi.
// Backend objects made by the module keep pointers into it, so the core never closes it.
#include <string>

#include "sgp/compute/backend.hpp"

namespace sgp::compute {

// Bump when CudaModuleApi or the Backend interface (include/sgp/compute/backend.hpp) changes: a
// module from another build is then refused instead of called through a stale vtable.
inline constexpr int kCudaModuleAbi = 1;

struct CudaModuleApi {
  int abi;  // kCudaModuleAbi of the module's build
  // CudaBackend::usable_device_count: never throws.
  int (*usable_device_count)(std::string* why_not);
  // A new CudaBackend(device_index, allow_tf32), owned by the caller; throws sgp::Error.
  Backend* (*make_backend)(int device_index, bool allow_tf32);
};

inline constexpr const char* kCudaModuleEntry = "sgp_cuda_module_api";
inline constexpr const char* kCudaModuleFile = "libsgp_cuda.so";

}  // namespace sgp::compute

extern "C" const sgp::compute::CudaModuleApi* sgp_cuda_module_api();
