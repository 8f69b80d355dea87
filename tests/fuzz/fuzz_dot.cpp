// Fuzz target: the DOT topology reader (parse_dot), as every peer runs it on the topology file.
#include <string_view>

#include "fuzz_target.hpp"
#include "sgp/topology/dot_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return sgp::fuzz::run_target(data, size, [](std::span<const std::uint8_t> bytes) {
    const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    // Both option sets peers and `sgp topology check` use.
    sgp::topology::DotReadOptions options;
    options.require_endpoints = !bytes.empty() && bytes.back() % 2 == 0;
    if (!bytes.empty() && bytes.front() % 3 == 0) options.self_weight = 0.5;
    sgp::topology::parse_dot(text, "fuzz.dot", options);
  });
}
