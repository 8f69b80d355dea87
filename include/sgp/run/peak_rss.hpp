#pragma once
// The peak resident set size of this process (Linux's VmHWM, from getrusage's ru_maxrss): what a
// summary reports as the memory a peer or a simulation needed.
#include <cstdint>

namespace sgp::run {

// Bytes: the most of this process's memory that was resident at once so far.
std::int64_t peak_rss_bytes();

}  // namespace sgp::run
