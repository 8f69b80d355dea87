#include "toml_reader.hpp"

#include <fmt/format.h>

#include "sgp/error.hpp"

namespace sgp::experiment {

void TomlReader::fail(const toml::source_region& where, const std::string& key,
                      const std::string& what) const {
  throw InputError(
      fmt::format("{}:{}:{}: {}: {}", file_, where.begin.line, where.begin.column, key, what));
}

void TomlReader::fail(const std::string& key, const std::string& what) const {
  throw InputError(fmt::format("{}: {}: {}", file_, key, what));
}

std::int64_t TomlReader::integer_in(const toml::node& n, const std::string& key, std::int64_t min,
                                    std::int64_t max) const {
  if (!n.is_integer()) fail(n, key, fmt::format("expected an integer, got {}", type_name(n)));
  const auto v = *n.value<std::int64_t>();
  if (v < min || v > max) {
    fail(n, key, fmt::format("expected an integer in [{}, {}], got {}", min, max, v));
  }
  return v;
}

std::string TomlReader::string(const toml::node& n, const std::string& key) const {
  if (!n.is_string()) fail(n, key, fmt::format("expected a string, got {}", type_name(n)));
  return *n.value<std::string>();
}

const toml::table& TomlReader::table(const toml::node& n, const std::string& key) const {
  if (!n.is_table()) fail(n, key, fmt::format("expected a table, got {}", type_name(n)));
  return *n.as_table();
}

void TomlReader::list(const toml::node& n, const std::string& key,
                      const std::function<void(const toml::node&)>& each) const {
  if (const auto* array = n.as_array()) {
    if (array->empty()) fail(n, key, "empty list: give at least one value");
    for (const auto& item : *array) each(item);
  } else if (n.is_table()) {
    fail(n, key, "expected a value or a list of values, got a table");
  } else {
    each(n);
  }
}

nlohmann::json TomlReader::to_json(const toml::node& n, const std::string& key) const {
  if (n.is_string()) return *n.value<std::string>();
  if (n.is_integer()) return *n.value<std::int64_t>();
  if (n.is_floating_point()) return *n.value<double>();
  if (n.is_boolean()) return *n.value<bool>();
  if (const auto* array = n.as_array()) {
    auto out = nlohmann::json::array();
    for (const auto& item : *array) out.push_back(to_json(item, key));
    return out;
  }
  fail(n, key, fmt::format("expected a value, got {}", type_name(n)));
}

std::string TomlReader::type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a floating-point number";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::array:
      return "a list";
    case toml::node_type::table:
      return "a table";
    default:
      return "a date or time";
  }
}

}  // namespace sgp::experiment
