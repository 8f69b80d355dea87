// Fuzz target: the sweep file reader (parse_sweep_spec), TOML text to validated grid points.
#include <string_view>

#include "fuzz_target.hpp"
#include "sgp/experiment/sweep_spec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return sgp::fuzz::run_target(data, size, [](std::span<const std::uint8_t> bytes) {
    const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    // Topology paths resolve against a directory that does not exist: no file is ever read.
    const bool quick = !bytes.empty() && bytes.back() % 2 == 0;
    sgp::experiment::parse_sweep_spec(text, "/nonexistent-sgp-fuzz/sweep.toml", quick);
  });
}
