#pragma once
// Which OpenBLAS kernels this process runs.
//
// OpenBLAS picks its kernels from the CPU model when the library is loaded. Some virtual machines
// report a CPU model it does not know, and it then falls back to its SSE3 "Prescott" kernels
// although the CPU has AVX2 or AVX-512: measured 2.7x slower on the W1 training step. The
// environment variable OPENBLAS_CORETYPE overrides the choice, but only before the library is
// loaded, so the `sgp` executable re-executes itself once with it set (see cli/main.cpp).
#include <optional>
#include <string>

namespace sgp::compute {

// The kernel family OpenBLAS is using, e.g. "SkylakeX", "Haswell", "Prescott".
std::string blas_core_name();

// When OPENBLAS_CORETYPE is unset and OpenBLAS fell back to Prescott on a CPU with AVX (or
// better), the core type that matches the CPU's features ("SkylakeX", "Haswell",
// "Sandybridge"); otherwise nothing.
std::optional<std::string> better_blas_coretype();

}  // namespace sgp::compute
