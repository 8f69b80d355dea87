#pragma once
// How each type of setting value is read and written (Codec<T>), and TypedSetting<T, Config>, the
// row of a settings table that binds a field of Config (TrainConfig by default) to its key, range
// and codec.
#include <charconv>
#include <cmath>
#include <concepts>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "sgp/config/settings.hpp"
#include "sgp/named_values.hpp"

namespace sgp::config::detail {

using nlohmann::json;

std::string_view trim(std::string_view text);
// Shortest text that reads back to the same float/double ("0.9", not "0.8999999761581421").
template <class T>
std::string shortest(T value) {
  return fmt::format("{}", value);
}

template <class T>
struct Codec;

// An integer beyond its C++ type (e.g. 1e12 for an int). The setting that reads it says its own
// range instead (TypedSetting::decode), which is what the user can act on.
class BeyondType : public SettingError {
 public:
  BeyondType(const std::string& what, std::string shown, long double min, long double max)
      : SettingError(what),
        shown(std::move(shown)),
        min(min),
        max(max),
        min_text(fmt::format("{:.0f}", min)),
        max_text(fmt::format("{:.0f}", max)) {}
  std::string shown;
  long double min, max;            // the type's
  std::string min_text, max_text;  // ... as integers
};

template <std::integral T>
requires(!std::same_as<T, bool>) struct Codec<T> {
  static std::string hint() { return "INT"; }
  static T fit(long double v, const std::string& shown) {
    if (v < static_cast<long double>(std::numeric_limits<T>::min()) ||
        v > static_cast<long double>(std::numeric_limits<T>::max())) {
      throw BeyondType(
          fmt::format("expected an integer in [{}, {}], got {}", std::numeric_limits<T>::min(),
                      std::numeric_limits<T>::max(), shown),
          shown, std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
    }
    return static_cast<T>(v);
  }
  static T from_text(std::string_view text) {
    text = trim(text);
    using Wide = std::conditional_t<std::is_signed_v<T>, std::int64_t, std::uint64_t>;
    Wide v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec == std::errc::result_out_of_range) return fit(1e30L, std::string(text));
    if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
      throw SettingError(
          fmt::format("expected an integer{}, got '{}'", std::is_signed_v<T> ? "" : " >= 0", text));
    }
    return fit(static_cast<long double>(v), std::string(text));
  }
  static T from_json(const json& j) {
    if (j.is_number_unsigned())
      return fit(static_cast<long double>(j.get<std::uint64_t>()), j.dump());
    if (j.is_number_integer())
      return fit(static_cast<long double>(j.get<std::int64_t>()), j.dump());
    throw SettingError(fmt::format("expected an integer, got {}", j.dump()));
  }
  static json to_json(T v) { return v; }
  static std::string to_text(T v) { return fmt::format("{}", v); }
};

template <std::floating_point T>
struct Codec<T> {
  static std::string hint() { return "NUMBER"; }
  // NaN, infinities and values beyond T are refused by the setting's range check.
  static T fit(double v, const std::string&) { return static_cast<T>(v); }
  static T from_text(std::string_view text) {
    text = trim(text);
    double v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec == std::errc::result_out_of_range) return fit(HUGE_VAL, std::string(text));
    if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
      throw SettingError(fmt::format("expected a number, got '{}'", text));
    }
    return fit(v, std::string(text));
  }
  static T from_json(const json& j) {
    if (!j.is_number()) throw SettingError(fmt::format("expected a number, got {}", j.dump()));
    return fit(j.get<double>(), j.dump());
  }
  // A float goes out as the double its shortest text denotes (0.9, not 0.8999999761581421).
  static json to_json(T v) { return std::stod(shortest(v)); }
  static std::string to_text(T v) { return shortest(v); }
};

template <>
struct Codec<bool> {
  static std::string hint() { return "BOOL"; }
  static bool from_text(std::string_view text) {
    text = trim(text);
    if (text == "true" || text == "1") return true;
    if (text == "false" || text == "0") return false;
    throw SettingError(fmt::format("expected true or false, got '{}'", text));
  }
  static bool from_json(const json& j) {
    if (!j.is_boolean())
      throw SettingError(fmt::format("expected true or false, got {}", j.dump()));
    return j.get<bool>();
  }
  static json to_json(bool v) { return v; }
  static std::string to_text(bool v) { return v ? "true" : "false"; }
};

template <>
struct Codec<std::string> {
  static std::string hint() { return "TEXT"; }
  static std::string from_text(std::string_view text) { return std::string(text); }
  static std::string from_json(const json& j) {
    if (!j.is_string()) throw SettingError(fmt::format("expected a string, got {}", j.dump()));
    return j.get<std::string>();
  }
  static json to_json(const std::string& v) { return v; }
  static std::string to_text(const std::string& v) { return v; }
};

template <class E>
requires std::is_enum_v<E>
struct Codec<E> {
  static std::string hint() { return fmt::format("{}", fmt::join(all_names<E>(), "|")); }
  static E from_text(std::string_view text) {
    text = trim(text);
    if (auto problem = unknown_name_problem<E>(text); !problem.empty()) throw SettingError(problem);
    return parse_name<E>(text, "");
  }
  static E from_json(const json& j) {
    if (!j.is_string()) {
      throw SettingError(
          fmt::format("expected one of {}, got {}", fmt::join(all_names<E>(), ", "), j.dump()));
    }
    return from_text(j.get<std::string>());
  }
  static json to_json(E v) { return std::string(name_of(v)); }
  static std::string to_text(E v) { return std::string(name_of(v)); }
};

// A value that may be absent: "" on the command line, null in JSON (e.g. sgp simulate's
// --consensus-step, whose absence means "the compressor's default").
template <class T>
struct Codec<std::optional<T>> {
  static std::string hint() { return Codec<T>::hint(); }
  static std::optional<T> from_text(std::string_view text) {
    if (trim(text).empty()) return std::nullopt;
    return Codec<T>::from_text(text);
  }
  static std::optional<T> from_json(const json& j) {
    if (j.is_null()) return std::nullopt;
    return Codec<T>::from_json(j);
  }
  static json to_json(const std::optional<T>& v) { return v ? Codec<T>::to_json(*v) : json(); }
  static std::string to_text(const std::optional<T>& v) {
    return v ? Codec<T>::to_text(*v) : std::string();
  }
};

// --compress: a 16-bit format or a compressor with its parameter ("topk:0.01").
template <>
struct Codec<gossip::PayloadCompression> {
  static std::string hint() { return "none|fp16|bf16|topk:R|randk:R|sign|qsgd:L"; }
  static gossip::PayloadCompression from_text(std::string_view text) {
    try {
      return gossip::parse_payload_compression(trim(text), "");
    } catch (const InputError& e) {
      throw SettingError(std::string(trim(e.what())));
    }
  }
  static gossip::PayloadCompression from_json(const json& j) {
    if (!j.is_string()) throw SettingError(fmt::format("expected a string, got {}", j.dump()));
    return from_text(j.get<std::string>());
  }
  static json to_json(const gossip::PayloadCompression& v) { return gossip::name_of(v); }
  static std::string to_text(const gossip::PayloadCompression& v) { return gossip::name_of(v); }
};

// Lists: comma-separated on the command line, arrays in JSON.
template <class T>
struct Codec<std::vector<T>> {
  static std::string hint() { return Codec<T>::hint() + ",..."; }
  static std::vector<T> from_text(std::string_view text) {
    std::vector<T> out;
    if (trim(text).empty()) return out;
    for (std::size_t start = 0;;) {
      const auto comma = text.find(',', start);
      out.push_back(Codec<T>::from_text(text.substr(start, comma - start)));
      if (comma == std::string_view::npos) return out;
      start = comma + 1;
    }
  }
  static std::vector<T> from_json(const json& j) {
    if (!j.is_array()) return {Codec<T>::from_json(j)};  // a single value is a list of one
    std::vector<T> out;
    for (const auto& item : j) out.push_back(Codec<T>::from_json(item));
    return out;
  }
  static json to_json(const std::vector<T>& v) {
    json out = json::array();
    for (const auto& item : v) out.push_back(Codec<T>::to_json(item));
    return out;
  }
  static std::string to_text(const std::vector<T>& v) {
    std::vector<std::string> parts;
    for (const auto& item : v) parts.push_back(Codec<T>::to_text(item));
    return fmt::format("{}", fmt::join(parts, ","));
  }
};

// The values a number (or each number of a list) may take.
struct Range {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_open = false, max_open = false;

  bool contains(double v) const {
    return (min_open ? v > min : v >= min) && (max_open ? v < max : v <= max);
  }
  // ">= 1", "in (0, 1]", or "" when unbounded.
  std::string bounds() const;
  // "an integer >= 1", "a number in (0, 1]" (a number is always finite)
  std::string describe(bool integer) const;
};

constexpr double kUnbounded = std::numeric_limits<double>::infinity();
constexpr Range at_least(double min) { return {min, kUnbounded, false, false}; }
constexpr Range above(double min) { return {min, kUnbounded, true, false}; }
constexpr Range between(double min, double max) { return {min, max, false, false}; }

template <class T>
constexpr bool is_number_v = std::is_arithmetic_v<T> && !std::is_same_v<T, bool>;

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};

template <class T, class Config = TrainConfig>
class TypedSetting final : public BasicSetting<Config> {
 public:
  using Extra = std::string (*)(const T&);  // a further check: "" when the value is fine

  TypedSetting(std::string_view key, std::string_view group, std::string_view help,
               SettingScope scope, bool in_sweeps, T Config::*field, Range range = {},
               Extra extra = nullptr)
      : BasicSetting<Config>(key, group, help, scope, in_sweeps),
        field_(field),
        range_(range),
        extra_(extra) {}

  bool is_switch() const override { return std::is_same_v<T, bool>; }
  std::string value_hint() const override {
    const std::string bounds = range_.bounds();
    if (bounds.empty()) return Codec<T>::hint();
    if constexpr (is_number_v<T> || is_optional<T>::value) {
      return fmt::format("{} {}", Codec<T>::hint(), bounds);
    }
    return fmt::format("{} (each {})", Codec<T>::hint(), bounds);
  }
  json get(const Config& c) const override { return Codec<T>::to_json(c.*field_); }
  std::string text(const Config& c) const override { return Codec<T>::to_text(c.*field_); }
  void set(Config& c, const json& value) const override {
    store(c, decode([&] { return Codec<T>::from_json(value); }));
  }
  void parse(Config& c, std::string_view text) const override {
    store(c, decode([&] { return Codec<T>::from_text(text); }));
  }
  std::string problem(const Config& c) const override { return check(c.*field_); }

 private:
  // Reads a value; one beyond its C++ type is refused with this setting's range (within the
  // type's), not the type's alone.
  template <class Read>
  T decode(Read read) const {
    try {
      return read();
    } catch (const BeyondType& e) {
      if (range_.bounds().empty()) throw;
      const bool low = std::isfinite(range_.min) && range_.min >= e.min;
      const bool high = std::isfinite(range_.max) && range_.max <= e.max;
      const std::string from =
          low ? fmt::format("{}{}", range_.min_open ? "(" : "[", shortest(range_.min))
              : "[" + e.min_text;
      const std::string to =
          high ? fmt::format("{}{}", shortest(range_.max), range_.max_open ? ")" : "]")
               : e.max_text + "]";
      throw SettingError(fmt::format("expected an integer in {}, {}, got {}", from, to, e.shown));
    }
  }
  std::string check_number(double v) const {
    constexpr bool integer = std::is_integral_v<T> || std::is_same_v<T, std::vector<int>>;
    if (!std::isfinite(v) || !range_.contains(v)) {
      return fmt::format("expected {}, got {}", range_.describe(integer), shortest(v));
    }
    return {};
  }
  std::string check(const T& v) const {
    if constexpr (is_optional<T>::value) {
      if constexpr (is_number_v<typename T::value_type>) {
        if (v) {
          if (auto p = check_number(static_cast<double>(*v)); !p.empty()) return p;
        }
      }
    } else if constexpr (is_number_v<T>) {
      if (auto p = check_number(static_cast<double>(v)); !p.empty()) return p;
    } else if constexpr (requires { typename T::value_type; } && !std::is_same_v<T, std::string>) {
      if constexpr (is_number_v<typename T::value_type>) {
        for (const auto& item : v)
          if (auto p = check_number(static_cast<double>(item)); !p.empty()) return p;
      }
    }
    return extra_ ? extra_(v) : std::string();
  }
  void store(Config& c, T value) const {
    if (auto p = check(value); !p.empty()) throw SettingError(p);
    c.*field_ = std::move(value);
  }

  T Config::*field_;
  Range range_;
  Extra extra_;
};

}  // namespace sgp::config::detail
