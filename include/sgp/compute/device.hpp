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
  // "auto" and "cuda" on a host with several GPUs: this process's place among the host's peers
  // ($LOCAL_RANK), which picks GPU local_index % count.
  int local_index = 0;
};

// The GPU that `device` means for the host's peer `local_index` when `device_count` GPUs are
// usable: the index of "cuda:<index>", else local_index % device_count (0 without a GPU).
// InputError on a bad device.
int gpu_index(const std::string& device, int local_index, int device_count);

// Parses and validates options.device (InputError naming the flag on a bad value), then builds
// the backend. "auto" takes the GPU when one is usable and otherwise logs, once, why it runs on
// the CPU. "cuda[:i]" throws InputError when that GPU is not usable, IoError when the CUDA
// backend module does not load (src/compute/cuda_module.hpp: it is loaded only for a GPU run, or
// for "auto" on a host with an NVIDIA driver). Without an index, the GPU is
// gpu_index(device, local_index, count).
std::unique_ptr<Backend> make_backend(const DeviceOptions& options);

// Whether this build has the CUDA backend compiled in.
bool cuda_compiled();

// Number of usable CUDA devices (0 without CUDA, without an NVIDIA driver or when the CUDA
// backend module does not load); `why_not` receives the reason when 0.
int cuda_device_count(std::string* why_not = nullptr);

}  // namespace sgp::compute
