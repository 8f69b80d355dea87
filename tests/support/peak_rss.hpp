#pragma once
// The peak resident set size (VmHWM) of a process, from /proc/<pid>/status: what tests use to
// show that hostile input does not make a process allocate.
#include <sys/types.h>

#include <cstdint>
#include <fstream>
#include <string>

namespace sgp::testing {

// Bytes, or -1 when the process (or /proc) is not there. pid 0: this process.
inline std::int64_t peak_rss_bytes(pid_t pid = 0) {
  std::ifstream status(pid == 0 ? std::string("/proc/self/status")
                                : "/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // "   123 kB"
  }
  return -1;
}

}  // namespace sgp::testing
