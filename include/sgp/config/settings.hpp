#pragma once
// The settings table: every field of TrainConfig declared once (settings.cpp) with its key,
// group, help text, type, default and allowed values. Everything that reads or writes training
// settings iterates this table:
//   - the command-line flags of sgp train / peer / launch (--key-with-dashes; cli/setting_flags),
//   - config.json (written by every run, read by `sgp peer --config` and `--resume`),
//   - sweep files' [train], [quick] and [grid] keys (experiment/sweep_file),
//   - validate(), the one check of a whole configuration.
// Adding a setting: a field in TrainConfig and one row in settings.cpp; nothing else.
//
// Values cross the table in two forms: text (a command-line argument, e.g. "0.1", "512,512",
// "cosine") and JSON (config.json; sweep files are converted to JSON by their reader). Every
// problem is a SettingError whose message says only what is wrong ("expected an integer >= 1,
// got 0"); the caller prefixes where (the flag, "config.json: key", "FILE:LINE:COL: train.key").
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sgp/config/train_config.hpp"
#include "sgp/error.hpp"

namespace sgp::config {

class SettingError : public InputError {
 public:
  using InputError::InputError;
};

// Which commands have the setting: every training run (sgp train too), or multi-peer runs only.
enum class SettingScope { every_run, peers };

// The flag of a settings key: "--" + the key with '-' for '_' (batch_size: --batch-size).
std::string setting_flag(std::string_view key);

// A row of a settings table that fills a `Config` struct (TrainConfig here; sgp simulate's
// SimulateSettings, simulate/simulate_settings.hpp). Rows are made with TypedSetting
// (config/setting_types.hpp).
template <class Config>
class BasicSetting {
 public:
  BasicSetting(std::string_view key, std::string_view group, std::string_view help,
               SettingScope scope, bool in_sweeps)
      : key_(key), group_(group), help_(help), scope_(scope), in_sweeps_(in_sweeps) {}
  virtual ~BasicSetting() = default;

  std::string_view key() const { return key_; }  // config.json and sweep key, e.g. batch_size
  std::string flag() const { return setting_flag(key_); }  // --batch-size
  std::string_view group() const { return group_; }
  std::string_view help() const { return help_; }
  SettingScope scope() const { return scope_; }
  // May be fixed in a sweep's [train] / [quick] or varied in its [grid]; false for what the
  // sweep runner decides itself (topology file, run directory, monitor, resume).
  bool in_sweeps() const { return in_sweeps_; }
  // Must have the same value when a run is resumed (checkpoints record these; a resume with
  // another value is refused): what the saved state only makes sense with.
  bool fixed_across_resume() const { return fixed_across_resume_; }
  BasicSetting& fix_across_resume() {
    fixed_across_resume_ = true;
    return *this;
  }

  virtual bool is_switch() const { return false; }  // a bool: --key / --no-key on the command line
  // What values look like, for help: "INT >= 1", "NUMBER in (0, 1)", "sgp|osgp|...".
  virtual std::string value_hint() const = 0;

  virtual nlohmann::json get(const Config& c) const = 0;
  // The value as text, as a flag would take it (help defaults, sweep point names).
  virtual std::string text(const Config& c) const = 0;
  // Set from JSON or text; SettingError (what is wrong) on a bad type or value. Allowed values
  // are checked here too, so nothing out of range is ever stored.
  virtual void set(Config& c, const nlohmann::json& value) const = 0;
  virtual void parse(Config& c, std::string_view text) const = 0;
  // What is wrong with the current value ("" when nothing): for configurations built in code.
  virtual std::string problem(const Config& c) const = 0;

 private:
  std::string_view key_, group_, help_;
  SettingScope scope_;
  bool in_sweeps_;
  bool fixed_across_resume_ = false;
};

using Setting = BasicSetting<TrainConfig>;

// Every setting, in the order help lists them.
std::span<const Setting* const> training_settings();
// Old names still read (a flag, a config.json or sweep key) but never written: `hidden`.
std::span<const Setting* const> setting_aliases();
// The setting (or alias) with this key, or nullptr.
const Setting* find_setting(std::string_view key);

// InputError "--flag: what" for the first setting out of range, or for a combination that does
// not fit (e.g. --lr-milestones without --lr-decay step).
void validate(const TrainConfig& config);

// Appends the command-line arguments that set `setting` to its value in `config`: --key VALUE,
// or --key / --no-key for a switch.
template <class Config>
void append_setting_arguments(std::vector<std::string>& args, const BasicSetting<Config>& setting,
                              const Config& config) {
  if (setting.is_switch()) {
    args.push_back(setting.get(config).template get<bool>() ? setting.flag()
                                                            : "--no-" + setting.flag().substr(2));
  } else {
    args.push_back(setting.flag());
    args.push_back(setting.text(config));
  }
}

// The command-line arguments that set these settings to their values in `config`
// (e.g. {"--tau", "2", "--no-nesterov"}), for commands that start copies of themselves.
std::vector<std::string> setting_arguments(const TrainConfig& config,
                                           std::span<const std::string_view> keys);

// Reads the settings in a JSON object such as config.json: a setting not in it keeps its value
// in `base`; a key that is no setting is an error unless listed in `other_keys` (run metadata
// such as "command"). InputError "<source>: <key>: what".
TrainConfig settings_from_json(const nlohmann::json& object, const std::string& source,
                               std::span<const std::string_view> other_keys, TrainConfig base = {});

}  // namespace sgp::config
