#include "sgp/compute/device.hpp"

#include <charconv>
#include <optional>

#include <spdlog/spdlog.h>

#include "sgp/compute/cpu_backend.hpp"
#include "sgp/error.hpp"
#include "sgp_config.h"

#include "cuda_loader.hpp"

namespace sgp::compute {

namespace {

struct ParsedDevice {
  DeviceKind kind;
  bool automatic;
  std::optional<int> index;  // cuda:<index>
};

ParsedDevice parse_device(const std::string& text) {
  if (text == "auto") return {DeviceKind::cuda, true, std::nullopt};
  if (text == "cpu") return {DeviceKind::cpu, false, std::nullopt};
  if (text == "cuda") return {DeviceKind::cuda, false, std::nullopt};
  if (text.starts_with("cuda:")) {
    int index = -1;
    const char* first = text.data() + 5;
    const char* last = text.data() + text.size();
    const auto [end, ec] = std::from_chars(first, last, index);
    if (ec == std::errc() && end == last && first != last && index >= 0) {
      return {DeviceKind::cuda, false, index};
    }
  }
  throw InputError(fmt::format(
      "--device: '{}' is not a device (expected auto, cpu, cuda or cuda:<index>)", text));
}

}  // namespace

bool cuda_compiled() { return SGP_HAVE_CUDA != 0; }

int gpu_index(const std::string& device, int local_index, int device_count) {
  const ParsedDevice parsed = parse_device(device);
  if (parsed.index) return *parsed.index;
  return device_count > 0 ? local_index % device_count : 0;
}

int cuda_device_count(std::string* why_not) {
  if (!cuda_compiled()) {
    if (why_not)
      *why_not = "this build has no CUDA backend (configured with -Dcuda=disabled or no nvcc)";
    return 0;
  }
  // Without a driver there is no GPU to find: the module (and the CUDA libraries it maps, about
  // 150 MiB resident) stays unloaded.
  if (!nvidia_driver_present(why_not)) return 0;
  try {
    return cuda_module().usable_device_count(why_not);
  } catch (const IoError& e) {
    if (why_not) *why_not = e.what();
    return 0;
  }
}

std::unique_ptr<Backend> make_backend(const DeviceOptions& options) {
  if (options.blas_threads < 1) {
    throw InputError(
        fmt::format("--blas-threads: must be at least 1, got {}", options.blas_threads));
  }
  const ParsedDevice parsed = parse_device(options.device);
  if (parsed.kind == DeviceKind::cuda) {
    if (!parsed.automatic && cuda_compiled()) {
      // An explicit request reports a module that is missing or does not load (IoError).
      try {
        cuda_module();
      } catch (const IoError& e) {
        throw IoError(fmt::format("--device {}: {}", options.device, e.what()));
      }
    }
    std::string why_not;
    const int count = cuda_device_count(&why_not);
    const int index = gpu_index(options.device, options.local_index, count);
    if (count > index) {
      try {
        if (!parsed.index && count > 1) {
          spdlog::info("device {}: cuda:{} of {} GPUs (this host's peer {})", options.device, index,
                       count, options.local_index);
        }
        return std::unique_ptr<Backend>(cuda_module().make_backend(index, options.allow_tf32));
      } catch (const Error& e) {
        // A device that is listed but cannot be set up (busy in exclusive mode, out of memory):
        // "auto" falls back to the CPU and says why; an explicit request reports the failure.
        if (!parsed.automatic) throw;
        why_not = fmt::format("cuda:{} could not be set up: {}", index, e.what());
      }
    } else if (count > 0) {
      why_not = fmt::format("only {} CUDA device(s) are usable", count);
    }
    if (!parsed.automatic) {
      throw InputError(fmt::format("--device {}: no usable GPU: {}", options.device, why_not));
    }
    // A machine without a GPU is normal; a GPU that is there but unusable (old driver, busy) is
    // worth a warning, since the run goes on at CPU speed.
    const bool no_gpu_here = why_not.find("no NVIDIA driver") != std::string::npos ||
                             why_not.find("cudaErrorNoDevice") != std::string::npos ||
                             !cuda_compiled();
    spdlog::log(no_gpu_here ? spdlog::level::info : spdlog::level::warn,
                "device auto: running on the CPU because {}", why_not);
  }
  return std::make_unique<CpuBackend>(options.blas_threads);
}

}  // namespace sgp::compute
