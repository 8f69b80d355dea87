// The --compress text of a compressor: parsing and printing.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>

#include "sgp/compress/compressor.hpp"

namespace sgp::compress {
namespace {

[[noreturn]] void bad_spec(std::string_view text, std::string_view flag, std::string_view why) {
  throw InputError(fmt::format(
      "{} {}: {} (expected topk:R or randk:R with 0 < R <= 1, sign, or qsgd:L with 1 <= L <= {})",
      flag, text, why, kMaxLevels));
}

// The whole of `text` as a number, or nullopt.
std::optional<double> number(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

}  // namespace

Compressor parse_compressor(std::string_view text, std::string_view flag) {
  const auto colon = text.find(':');
  const std::string name(text.substr(0, colon));
  const bool has_argument = colon != std::string_view::npos;
  const std::string argument = has_argument ? std::string(text.substr(colon + 1)) : std::string();
  Compressor c;
  if (name == "sign") {
    if (has_argument) bad_spec(text, flag, "sign takes no argument");
    c.kind = Kind::sign;
    return c;
  }
  if (name != "topk" && name != "randk" && name != "qsgd") bad_spec(text, flag, "unknown kind");
  const auto value = number(argument);
  if (!value) bad_spec(text, flag, fmt::format("{} needs a number after ':'", name));
  if (name == "qsgd") {
    if (*value != std::floor(*value) || *value < 1 || *value > kMaxLevels) {
      bad_spec(text, flag, "the number of levels must be an integer in range");
    }
    c.kind = Kind::qsgd;
    c.levels = static_cast<std::uint32_t>(*value);
    return c;
  }
  if (!(*value > 0.0 && *value <= 1.0)) bad_spec(text, flag, "the fraction must be in (0, 1]");
  c.kind = name == "topk" ? Kind::topk : Kind::randk;
  c.ratio = *value;
  return c;
}

std::string compressor_name(const Compressor& c) {
  switch (c.kind) {
    case Kind::topk:
      return fmt::format("topk:{}", c.ratio);
    case Kind::randk:
      return fmt::format("randk:{}", c.ratio);
    case Kind::sign:
      return "sign";
    case Kind::qsgd:
      return fmt::format("qsgd:{}", c.levels);
  }
  return "unknown";
}

namespace {
double qsgd_variance(const Compressor& c, std::size_t dim) {
  const double n = static_cast<double>(dim), levels = c.levels;
  return std::min(n / (levels * levels), std::sqrt(n) / levels);
}
}  // namespace

double copy_scale(const Compressor& c, std::size_t dim) {
  return c.kind == Kind::qsgd ? 1.0 / (1.0 + qsgd_variance(c, dim)) : 1.0;
}

double default_consensus_step(const Compressor& c, std::size_t dim) {
  switch (c.kind) {
    case Kind::topk:
    case Kind::randk:
      return c.ratio;
    case Kind::sign:
      return 0.005;
    case Kind::qsgd:
      return copy_scale(c, dim);
  }
  return c.ratio;
}

}  // namespace sgp::compress
