#pragma once
// The names of the files of a run directory.
#include <cstdint>
#include <optional>
#include <string_view>

namespace sgp::run {

// "checkpoint-<rank>-<iteration>.bin"; nothing for any other name, or numbers out of range.
struct CheckpointFileName {
  int rank = 0;
  std::int64_t iteration = 0;
};
std::optional<CheckpointFileName> parse_checkpoint_file_name(std::string_view name);

}  // namespace sgp::run
