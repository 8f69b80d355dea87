#pragma once
// Visible skips. A test case that cannot run here (no Fashion-MNIST, not root, no GPU) calls
// SGP_SKIP(reason) and returns. The shared runner (test_main.cpp) then prints one line
// "SKIPPED: <test case>: <reason>" per skipped case and exits 77, which meson reports as SKIP,
// never OK; a failure anywhere in the executable still exits 1. scripts/run-tests counts the
// skips and prints those lines.
#include <cstdlib>
#include <filesystem>
#include <string>

namespace sgp::testing {

// Records that the running test case did not (fully) run, and why.
void record_skip(const std::string& reason);

// Where the data module looks for Fashion-MNIST: $SGP_DATA_DIR, else the Debian package's path.
inline bool fashion_mnist_installed() {
  const char* env = std::getenv("SGP_DATA_DIR");
  const std::filesystem::path dir = env && *env ? env : "/usr/share/datasets/fashion-mnist";
  return std::filesystem::exists(dir / "train-images-idx3-ubyte.gz") &&
         std::filesystem::exists(dir / "t10k-images-idx3-ubyte.gz");
}

}  // namespace sgp::testing

// Ends the current test case as skipped, for `reason` (a string).
#define SGP_SKIP(reason)                 \
  do {                                   \
    ::sgp::testing::record_skip(reason); \
    return;                              \
  } while (false)

#define SGP_SKIP_WITHOUT_FASHION_MNIST()                                                 \
  do {                                                                                   \
    if (!::sgp::testing::fashion_mnist_installed()) {                                    \
      SGP_SKIP("Fashion-MNIST is not installed (Debian package dataset-fashion-mnist)"); \
    }                                                                                    \
  } while (false)
