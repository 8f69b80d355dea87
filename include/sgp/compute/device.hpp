#pragma once
// Choosing a backend from the --device flag: "auto", "cpu", "cuda" or "cuda:<index>".
#include <memory>
#include <string>

#include "sgp/compute/backend.hpp"

namespace sgp::compute {

struct DeviceOptions {
  std::string device = "auto";
  int blas_threads = 1;     // OpenBLAS threads of the CPU backend
  bool allow_tf32 = false;  // CUDA: let cuBLAS use TF32 tensor cores for fp32 GEMMs
};

// Parses and validates options.device (InputError naming the flag on a bad value), then builds
// the backend. "auto" takes the GPU when one is usable and otherwise logs, once, why it runs on
// the CPU. "cuda[:i]" throws InputError when that GPU is not usable.
std::unique_ptr<Backend> make_backend(const DeviceOptions& options);

// Whether this build has the CUDA backend compiled in.
bool cuda_compiled();

// Number of usable CUDA devices (0 without CUDA); `why_not` receives the reason when 0.
int cuda_device_count(std::string* why_not = nullptr);

}  // namespace sgp::compute
