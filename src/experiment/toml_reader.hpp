#pragma once
// Reading a TOML document with messages that say where: every failure is an InputError
// "FILE:LINE:COLUMN: KEY: what". Values are handed on as JSON (to_json), the form the settings
// table reads. The only file that sees toml++ besides toml_reader.cpp and sweep_spec.cpp.
#include <cstdint>
#include <functional>
#include <string>

#include <toml++/toml.h>
#include <nlohmann/json.hpp>

namespace sgp::experiment {

class TomlReader {
 public:
  explicit TomlReader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const toml::source_region& where, const std::string& key,
                         const std::string& what) const;
  [[noreturn]] void fail(const toml::node& node, const std::string& key,
                         const std::string& what) const {
    fail(node.source(), key, what);
  }
  // Fails naming the file only ("FILE: KEY: what"), for what has no position (a missing table).
  [[noreturn]] void fail(const std::string& key, const std::string& what) const;

  std::int64_t integer_in(const toml::node& n, const std::string& key, std::int64_t min,
                          std::int64_t max) const;
  std::string string(const toml::node& n, const std::string& key) const;
  const toml::table& table(const toml::node& n, const std::string& key) const;
  // A list of values, each handed to `each`; a single value counts as a list of one.
  void list(const toml::node& n, const std::string& key,
            const std::function<void(const toml::node&)>& each) const;
  // The value as JSON (numbers, strings, booleans and lists of them).
  nlohmann::json to_json(const toml::node& n, const std::string& key) const;

  static std::string type_name(const toml::node& n);
  const std::string& file() const { return file_; }

 private:
  std::string file_;
};

}  // namespace sgp::experiment
