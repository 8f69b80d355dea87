#pragma once
// Command-line flags from the settings table (sgp/config/settings.hpp): one flag per setting, in
// its group, with its allowed values and default in the help. The values given are recorded and
// laid over a base configuration by apply(), so that a command can first read one (defaults, a
// config.json) and let the flags change it.
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sgp/config/settings.hpp"

namespace CLI {
class App;
}

namespace sgp::cli {

// The flags of a settings table's rows, and the values given to them in the order given: the
// part of SettingFlags that any table (TrainConfig's, sgp simulate's) shares. Instantiated in
// setting_flags.cpp for the tables there are.
template <class Config>
class FlagValues {
 public:
  using Row = config::BasicSetting<Config>;
  // --key VALUE, or --key / --no-key for a switch, in the row's group; `defaults` in the help.
  void add_flag(CLI::App& command, const Row& row, const Config& defaults);
  // `base` with every flag given laid over it; InputError "--flag: what" for a bad value.
  Config apply(Config base) const;
  // The rows given on the command line, in the order given.
  std::vector<const Row*> given() const;
  bool was_given(std::string_view key) const;

 private:
  std::vector<std::pair<const Row*, std::string>> values_;
};

class SettingFlags {
 public:
  // Flags for every setting of every run, plus the multi-peer ones when `peers`.
  static std::shared_ptr<SettingFlags> add(CLI::App& command, bool peers);
  // Flags for these settings only (commands that share a few, e.g. sgp consensus --tau), with
  // `defaults` shown in the help (the command's own defaults where they differ).
  static std::shared_ptr<SettingFlags> add(CLI::App& command,
                                           std::span<const std::string_view> keys,
                                           const config::TrainConfig& defaults = {});
  // Adds --config FILE: settings read from a config.json (a run's, or one written by hand)
  // before the flags are laid over them.
  void add_config_option(CLI::App& command);

  // The configuration of this command line: the --config file's settings (with --resume and
  // no --config: <run-dir>/config.json's, when there is one; else the defaults), the flags over
  // them, then validate(). A resume refuses flags that contradict the recorded settings its
  // checkpoints depend on, naming each. InputError naming the flag or file for a bad value.
  config::TrainConfig configuration() const;

  // `base` with every flag given laid over it; InputError "--flag: what" for a bad value.
  config::TrainConfig apply(config::TrainConfig base) const;
  const std::string& config_file() const { return config_file_; }
  // The settings given on the command line, in the order given.
  std::vector<const config::Setting*> given() const { return values_.given(); }

 private:
  // The config.json the settings start from: --config, else <run-dir>/config.json on a resume.
  std::string recorded_config() const;

  std::string config_file_;
  FlagValues<config::TrainConfig> values_;
};

}  // namespace sgp::cli
