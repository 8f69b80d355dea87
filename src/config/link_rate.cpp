#include "sgp/config/link_rate.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "sgp/error.hpp"

namespace sgp::config {

namespace {

constexpr double kMinRate = 1e3, kMaxRate = 100e9;

[[noreturn]] void bad(std::string_view text, std::string_view what) {
  throw InputError(fmt::format(
      "'{}': {} (expected none, unlimited or a rate such as 100mbit, 1gbit)", text, what));
}

}  // namespace

std::string LinkRate::tc_rate() const {
  return fmt::format("{}bit", static_cast<long long>(std::llround(bits_per_second)));
}

LinkRate parse_link_rate(std::string_view text) {
  if (text.empty() || text == "none") return {};
  if (text == "unlimited") return {true, 0};
  // Longest suffix first: "mbit" also ends in "bit".
  static constexpr std::array<std::pair<std::string_view, double>, 4> units = {
      {{"kbit", 1e3}, {"mbit", 1e6}, {"gbit", 1e9}, {"bit", 1.0}}};
  for (const auto& [unit, scale] : units) {
    if (!text.ends_with(unit)) continue;
    const auto number = text.substr(0, text.size() - unit.size());
    double value = 0;
    const auto r = std::from_chars(number.data(), number.data() + number.size(), value);
    if (number.empty() || r.ec != std::errc{} || r.ptr != number.data() + number.size() ||
        !std::isfinite(value)) {
      bad(text, "not a number before the unit");
    }
    const double bits = value * scale;
    if (bits < kMinRate || bits > kMaxRate) bad(text, "outside 1kbit .. 100gbit");
    return {true, bits};
  }
  bad(text, "no unit (bit, kbit, mbit or gbit)");
}

}  // namespace sgp::config
