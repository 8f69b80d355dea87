#pragma once
// Finding and opening the CUDA backend module (cuda_module.hpp; compute module only).
#include <string>

#include "cuda_module.hpp"

namespace sgp::compute {

// Whether this host has an NVIDIA driver, decided from the files the driver creates, without
// loading any CUDA library; `why_not` (if not null) receives the reason when it has none.
bool nvidia_driver_present(std::string* why_not);

// The module's entry points, loaded on the first call (once per process, thread-safe, kept
// open). Where it looks: $SGP_CUDA_MODULE alone when set; else beside the executable or shared
// library that holds this code (build/sgp, an installed bin/sgp), then the directories it is
// installed to and built in. Throws IoError naming the path and dlerror() when the module is
// missing, does not load, or comes from another build.
const CudaModuleApi& cuda_module();

}  // namespace sgp::compute
