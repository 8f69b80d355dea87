#include "sgp/compute/blas_kernels.hpp"

#include <cblas.h>

#include <cstdlib>
#include <string_view>

namespace sgp::compute {

std::string blas_core_name() {
  const char* name = openblas_get_corename();
  return name ? name : "unknown";
}

std::optional<std::string> better_blas_coretype() {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return std::nullopt;  // the user chose
  const std::string core = blas_core_name();
  if (core != "Prescott" && core != "prescott") return std::nullopt;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  if (__builtin_cpu_supports("avx")) return "Sandybridge";
#endif
  return std::nullopt;
}

}  // namespace sgp::compute
