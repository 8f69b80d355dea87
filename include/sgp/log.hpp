#pragma once
// Logging: spdlog, every line tagged with the host and the peer's rank; level chosen at run time.
#include <unistd.h>

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

// This machine's name up to the first dot ("" when it has none).
inline std::string short_host_name() {
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0) return {};
  std::string host(name.data());
  return host.substr(0, host.find('.'));
}

// Sets the default logger's pattern and level. Every line carries the date and time, the host
// (logs of a multi-host run end up side by side) and `rank` (-1: none, e.g. a launcher):
// "[2026-11-24 04:11:21.142] [node1 rank 3] [info] ...".
inline void configure_logging(int rank, LogLevel level) {
  const std::string who = rank >= 0 ? fmt::format("rank {}", rank) : std::string("sgp");
  const std::string host = short_host_name();
  const std::string tag = host.empty() ? who : host + " " + who;
  spdlog::set_pattern(fmt::format("[%Y-%m-%d %H:%M:%S.%e] [{}] [%^%l%$] %v", tag));
  spdlog::set_level(spdlog::level::from_str(std::string(name_of(level))));
}

}  // namespace sgp
