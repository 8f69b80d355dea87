#pragma once
// Deadlines that real processes are given in tests (--timeout-ms, the failure detector's cap),
// scaled by $SGP_TEST_TIME_SCALE: a sanitized build runs about three times slower, and
// scripts/run-sanitized-tests sets 3 (as it scales meson's own time-outs). Default 1.
#include <cstdlib>
#include <string>

namespace sgp::testing {

inline int scaled_ms(int ms) {
  const char* env = std::getenv("SGP_TEST_TIME_SCALE");
  const int scale = env ? std::atoi(env) : 1;
  return ms * (scale >= 1 ? scale : 1);
}

}  // namespace sgp::testing
