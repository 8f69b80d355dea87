#include "cuda_loader.hpp"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sgp/error.hpp"

namespace sgp::compute {

namespace {

namespace fs = std::filesystem;

// The directory of the executable or shared library (the python extension) holding this code:
// the main program's link map has an empty name, so it is found through /proc/self/exe.
std::string own_directory() {
  Dl_info info{};
  link_map* map = nullptr;
  if (dladdr1(reinterpret_cast<void*>(&own_directory), &info, reinterpret_cast<void**>(&map),
              RTLD_DL_LINKMAP) == 0 ||
      map == nullptr) {
    return {};
  }
  std::error_code ec;
  const fs::path object = map->l_name[0] != '\0' ? fs::absolute(map->l_name, ec)
                                                 : fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : object.parent_path().string();
}

const char* module_from_environment() {
  const char* path = std::getenv("SGP_CUDA_MODULE");
  return path != nullptr && *path != '\0' ? path : nullptr;
}

std::vector<std::string> candidate_paths() {
  // Absolute, so that dlopen does not search its own path list for a bare file name.
  if (const char* path = module_from_environment()) return {fs::absolute(path).string()};
  std::vector<std::string> paths;
  for (const std::string& dir : {own_directory(), std::string(SGP_CUDA_MODULE_INSTALL_DIR),
                                 std::string(SGP_CUDA_MODULE_BUILD_DIR)}) {
    if (dir.empty()) continue;
    const std::string path = (fs::path(dir) / kCudaModuleFile).string();
    if (std::find(paths.begin(), paths.end(), path) == paths.end()) paths.push_back(path);
  }
  return paths;
}

std::string last_dlerror() {
  const char* text = dlerror();
  return text != nullptr ? text : "no reason given";
}

// Opens the first candidate that exists; a failure names that file and the loader's reason.
const CudaModuleApi* load(const std::vector<std::string>& candidates) {
  const auto found = std::find_if(candidates.begin(), candidates.end(), [](const auto& path) {
    std::error_code ec;
    return fs::exists(path, ec);
  });
  if (found == candidates.end()) {
    if (module_from_environment()) {
      throw IoError(
          fmt::format("SGP_CUDA_MODULE: no CUDA backend module at {}", candidates.front()));
    }
    throw IoError(fmt::format(
        "the CUDA backend module {} is in none of: {} (install it beside the sgp executable, or "
        "set SGP_CUDA_MODULE to its path)",
        kCudaModuleFile, fmt::join(candidates, ", ")));
  }
  const std::string& path = *found;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    throw IoError(fmt::format("cannot load the CUDA backend module {}: {}", path, last_dlerror()));
  }
  using Entry = const CudaModuleApi* (*)();
  const auto entry = reinterpret_cast<Entry>(dlsym(handle, kCudaModuleEntry));
  if (entry == nullptr) {
    throw IoError(fmt::format("{} is not sgp's CUDA backend module (no {}): {}", path,
                              kCudaModuleEntry, last_dlerror()));
  }
  const CudaModuleApi* api = entry();
  if (api == nullptr || api->abi != kCudaModuleAbi) {
    throw IoError(fmt::format(
        "the CUDA backend module {} comes from another build of sgp (module interface {}, this "
        "sgp's {}): rebuild and install both together",
        path, api != nullptr ? api->abi : -1, kCudaModuleAbi));
  }
  return api;
}

}  // namespace

bool nvidia_driver_present(std::string* why_not) {
  // /dev/dxg: a GPU under WSL2, whose driver lives on the Windows side.
  static constexpr const char* kDriverFiles[] = {"/proc/driver/nvidia/version", "/dev/nvidiactl",
                                                 "/dev/dxg"};
  for (const char* file : kDriverFiles) {
    std::error_code ec;
    if (fs::exists(file, ec)) return true;
  }
  if (why_not != nullptr) {
    *why_not =
        fmt::format("no NVIDIA driver on this host (none of {})", fmt::join(kDriverFiles, ", "));
  }
  return false;
}

const CudaModuleApi& cuda_module() {
  // Loaded once; a failure is kept and reported again to every caller.
  struct Loaded {
    const CudaModuleApi* api = nullptr;
    std::string error;
  };
  static const Loaded loaded = [] {
    try {
      return Loaded{load(candidate_paths()), {}};
    } catch (const IoError& e) {
      return Loaded{nullptr, e.what()};
    }
  }();
  if (loaded.api == nullptr) throw IoError(loaded.error);
  return *loaded.api;
}

}  // namespace sgp::compute
