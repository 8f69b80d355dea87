#pragma once
// Logging: spdlog, every line tagged with the peer's rank; level chosen at run time.
#include <string>

#include <spdlog/spdlog.h>

#include "sgp/error.hpp"

namespace sgp {

// Sets the default logger's pattern to carry `rank` (-1: no rank, e.g. a launcher) and its level
// ("trace", "debug", "info", "warn", "error", "off").
inline void configure_logging(int rank, const std::string& level) {
  const std::string tag = rank >= 0 ? fmt::format("rank {}", rank) : std::string("sgp");
  spdlog::set_pattern(fmt::format("[%H:%M:%S.%e] [{}] [%^%l%$] %v", tag));
  const auto parsed = spdlog::level::from_str(level);
  if (parsed == spdlog::level::off && level != "off") {
    throw InputError(fmt::format(
        "--log-level: '{}' is not a level (expected trace, debug, info, warn, error or off)",
        level));
  }
  spdlog::set_level(parsed);
}

}  // namespace sgp
