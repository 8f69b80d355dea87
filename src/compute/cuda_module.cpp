// The CUDA backend module's one entry point (cuda_module.hpp).
#include "cuda_module.hpp"

#include "sgp/compute/cuda_backend.hpp"

namespace {

sgp::compute::Backend* make_cuda_backend(int device_index, bool allow_tf32) {
  return new sgp::compute::CudaBackend(device_index, allow_tf32);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const sgp::compute::CudaModuleApi*
sgp_cuda_module_api() {
  static const sgp::compute::CudaModuleApi api{sgp::compute::kCudaModuleAbi,
                                               &sgp::compute::CudaBackend::usable_device_count,
                                               &make_cuda_backend};
  return &api;
}
