#pragma once
// Logging: spdlog, every line tagged with the peer's rank; level chosen at run time.
#include <array>
#include <span>
#include <string>

#include <spdlog/spdlog.h>

#include "sgp/named_values.hpp"

namespace sgp {

enum class LogLevel { trace, debug, info, warn, error, off };

inline std::span<const NamedValue<LogLevel>> names(LogLevel) {
  static constexpr std::array<NamedValue<LogLevel>, 6> table = {{
      {LogLevel::trace, "trace", "everything, message by message"},
      {LogLevel::debug, "debug", "details useful when something goes wrong"},
      {LogLevel::info, "info", "progress and results"},
      {LogLevel::warn, "warn", "only what may need attention"},
      {LogLevel::error, "error", "only errors"},
      {LogLevel::off, "off", "nothing"},
  }};
  return table;
}

// Sets the default logger's pattern to carry `rank` (-1: no rank, e.g. a launcher) and its level.
inline void configure_logging(int rank, LogLevel level) {
  const std::string tag = rank >= 0 ? fmt::format("rank {}", rank) : std::string("sgp");
  spdlog::set_pattern(fmt::format("[%H:%M:%S.%e] [{}] [%^%l%$] %v", tag));
  spdlog::set_level(spdlog::level::from_str(std::string(name_of(level))));
}

}  // namespace sgp
