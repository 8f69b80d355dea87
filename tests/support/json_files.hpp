#pragma once
// The JSON files of a run directory: summary.json and friends, and JSONL logs.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sgp::testing {

inline nlohmann::json read_json(const std::filesystem::path& path) {
  return nlohmann::json::parse(std::ifstream(path));
}

// One object per line.
inline std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& path) {
  std::vector<nlohmann::json> records;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) records.push_back(nlohmann::json::parse(line));
  return records;
}

}  // namespace sgp::testing
