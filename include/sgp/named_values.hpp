#pragma once
// Enums whose values have names on the command line, in config.json and in sweep files: each
// enum has one table of {value, name, help} (a `names(E{})` function found by ADL), and every
// parser, help text and error message reads that table, so a value is spelled in one place.
#include <algorithm>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sgp/error.hpp"

namespace sgp {

template <class E>
struct NamedValue {
  E value;
  std::string_view name;
  std::string_view help;
};

// The table of E: `names(E{})` must be declared next to E.
template <class E>
std::span<const NamedValue<E>> names_of() {
  return names(E{});
}

template <class E>
std::string_view name_of(E value) {
  for (const auto& entry : names_of<E>())
    if (entry.value == value) return entry.name;
  SGP_ENFORCE(false, "enum value {} has no name", static_cast<int>(value));
}

template <class E>
std::vector<std::string_view> all_names() {
  std::vector<std::string_view> out;
  for (const auto& entry : names_of<E>()) out.push_back(entry.name);
  return out;
}

// "'x' is not one of a, b, c": the problem with a name, or "" when `text` names a value.
template <class E>
std::string unknown_name_problem(std::string_view text) {
  for (const auto& entry : names_of<E>())
    if (entry.name == text) return {};
  return fmt::format("'{}' is not one of {}", text, fmt::join(all_names<E>(), ", "));
}

// The value named `text`; InputError "<what>: 'x' is not one of a, b, c" otherwise.
template <class E>
E parse_name(std::string_view text, std::string_view what) {
  for (const auto& entry : names_of<E>())
    if (entry.name == text) return entry.value;
  throw InputError(fmt::format("{}: {}", what, unknown_name_problem<E>(text)));
}

}  // namespace sgp
