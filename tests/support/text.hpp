#pragma once
// Text helpers shared by the tests: substring checks and whole files as strings.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>

namespace sgp::testing {

inline bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

// The whole file as bytes ("" when it cannot be opened).
inline std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace sgp::testing
