#include "sgp/run/file_names.hpp"

#include <charconv>
#include <system_error>

#include <fmt/format.h>

namespace sgp::run {

std::string peer_log_file(int rank) { return fmt::format("peer-{}.jsonl", rank); }
std::string peer_summary_file(int rank) { return fmt::format("peer-{}-summary.json", rank); }
std::string peer_model_file(int rank) { return fmt::format("peer-{}-model.bin", rank); }
std::string peer_output_file(int rank) { return fmt::format("peer-{}.log", rank); }

std::string checkpoint_file_name(int rank, std::int64_t iteration) {
  return fmt::format("checkpoint-{}-{}.bin", rank, iteration);
}

std::optional<CheckpointFileName> parse_checkpoint_file_name(std::string_view name) {
  constexpr std::string_view prefix = "checkpoint-", suffix = ".bin";
  if (!name.starts_with(prefix) || !name.ends_with(suffix)) return std::nullopt;
  name = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  const auto dash = name.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  auto number = [](std::string_view digits, auto& value) {
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    return !digits.empty() && ec == std::errc() && end == digits.data() + digits.size() &&
           value >= 0 && digits.find_first_not_of("0123456789") == std::string_view::npos;
  };
  CheckpointFileName out;
  if (!number(name.substr(0, dash), out.rank) || !number(name.substr(dash + 1), out.iteration)) {
    return std::nullopt;
  }
  return out;
}

}  // namespace sgp::run
