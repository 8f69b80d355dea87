#include "sgp/config/straggler.hpp"

#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "sgp/error.hpp"

namespace sgp::config {

namespace {

constexpr double kMaxFactor = 1000.0;

[[noreturn]] void bad(std::string_view text, std::string_view what) {
  throw InputError(fmt::format("'{}': {} (expected RANK:FACTOR, e.g. 3:4)", text, what));
}

}  // namespace

StragglerSpec parse_straggler_spec(std::string_view text) {
  if (text.empty() || text == "none") return {};
  const auto colon = text.find(':');
  if (colon == std::string_view::npos) bad(text, "no ':'");
  StragglerSpec spec;
  const auto rank_text = text.substr(0, colon), factor_text = text.substr(colon + 1);
  const auto r = std::from_chars(rank_text.data(), rank_text.data() + rank_text.size(), spec.rank);
  if (r.ec != std::errc{} || r.ptr != rank_text.data() + rank_text.size() || spec.rank < 0) {
    bad(text, "RANK must be a whole number >= 0");
  }
  const auto f =
      std::from_chars(factor_text.data(), factor_text.data() + factor_text.size(), spec.factor);
  if (f.ec != std::errc{} || f.ptr != factor_text.data() + factor_text.size() ||
      !std::isfinite(spec.factor) || spec.factor < 1.0 || spec.factor > kMaxFactor) {
    bad(text, fmt::format("FACTOR must be a number in [1, {}]", kMaxFactor));
  }
  return spec;
}

std::string format_straggler_spec(const StragglerSpec& spec) {
  if (spec.rank < 0) return "";
  return fmt::format("{}:{}", spec.rank, spec.factor);
}

std::chrono::nanoseconds straggler_pause(const StragglerSpec& spec, std::chrono::nanoseconds step) {
  return std::chrono::nanoseconds(
      std::llround((spec.factor - 1.0) * static_cast<double>(step.count())));
}

}  // namespace sgp::config
