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
  std::vector<const config::Setting*> given() const;

 private:
  // The config.json the settings start from: --config, else <run-dir>/config.json on a resume.
  std::string recorded_config() const;
  void add_flag(CLI::App& command, const config::Setting& setting,
                const config::TrainConfig& defaults);

  std::string config_file_;
  std::vector<std::pair<const config::Setting*, std::string>> values_;
};

}  // namespace sgp::cli
