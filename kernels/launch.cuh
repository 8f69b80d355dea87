#pragma once
// Shared launch parameters of the kernels in kernels/*.cu. Host launchers never throw: each
// returns the cudaError_t of its launch (cudaGetLastError) and the caller (CudaBackend) checks it
// with file:line. All work is enqueued on Launch::stream; nothing here synchronises.
#include <cuda_runtime_api.h>

#include <cstddef>

namespace sgp::kernels {

inline constexpr int kThreads = 256;       // threads per block of every 1-D kernel
inline constexpr int kMaxPartials = 2048;  // most blocks a reduction uses (= partial sums)

struct Launch {
  cudaStream_t stream = nullptr;
  int max_blocks = 1;  // cap of grid-stride kernels: enough resident blocks to fill the device
};

// Device-side scalar results of reductions, copied back to the host in one transfer.
struct ReductionResult {
  double value;                // sum (squared norm/distance, total loss)
  unsigned long long count;    // count_correct
  unsigned int first_bad_row;  // softmax_cross_entropy: smallest row with a label out of range
  unsigned int padding;
};
inline constexpr unsigned int kNoBadRow = 0xFFFFFFFFu;

}  // namespace sgp::kernels
