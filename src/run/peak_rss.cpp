#include "sgp/run/peak_rss.hpp"

#include <sys/resource.h>

namespace sgp::run {

std::int64_t peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::int64_t>(usage.ru_maxrss) * 1024;  // Linux: KiB
}

}  // namespace sgp::run
