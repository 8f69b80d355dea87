#include "setting_flags.hpp"

#include <CLI/CLI.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sgp/run/run_config.hpp"
#include "sgp/simulate/simulate_settings.hpp"

namespace sgp::cli {

template <class Config>
void FlagValues<Config>::add_flag(CLI::App& cmd, const Row& s, const Config& defaults) {
  if (s.is_switch()) {
    // Two flags, the second not listed, so that help shows the real default ("(default on)"),
    // not CLI11's "{false}" for the negated name.
    const std::string off = "--no-" + s.flag().substr(2);
    cmd.add_flag_callback(
           s.flag(), [this, &s] { values_.emplace_back(&s, "true"); },
           fmt::format("{} (default {}; {} for off)", s.help(),
                       s.get(defaults).template get<bool>() ? "on" : "off", off))
        ->group(std::string(s.group()));
    cmd.add_flag_callback(off, [this, &s] { values_.emplace_back(&s, "false"); })->group("");
    return;
  }
  const std::string shown = s.text(defaults);
  cmd.add_option_function<std::string>(
         s.flag(), [this, &s](const std::string& value) { values_.emplace_back(&s, value); },
         std::string(s.help()))
      ->type_name(s.value_hint())
      ->default_str(shown)
      ->group(std::string(s.group()));
}

std::shared_ptr<SettingFlags> SettingFlags::add(CLI::App& cmd, bool peers) {
  auto flags = std::make_shared<SettingFlags>();
  for (const config::Setting* s : config::training_settings()) {
    if (peers || s->scope() == config::SettingScope::every_run)
      flags->values_.add_flag(cmd, *s, {});
  }
  for (const config::Setting* s : config::setting_aliases()) flags->values_.add_flag(cmd, *s, {});
  return flags;
}

std::shared_ptr<SettingFlags> SettingFlags::add(CLI::App& cmd,
                                                std::span<const std::string_view> keys,
                                                const config::TrainConfig& defaults) {
  auto flags = std::make_shared<SettingFlags>();
  for (auto key : keys) {
    const config::Setting* s = config::find_setting(key);
    SGP_ENFORCE(s != nullptr, "no setting '{}'", key);
    flags->values_.add_flag(cmd, *s, defaults);
  }
  return flags;
}

template <class Config>
Config FlagValues<Config>::apply(Config base) const {
  for (const auto& [setting, value] : values_) {
    try {
      setting->parse(base, value);
    } catch (const config::SettingError& e) {
      throw InputError(fmt::format("{}: {}", setting->flag(), e.what()));
    }
  }
  return base;
}

template <class Config>
std::vector<const typename FlagValues<Config>::Row*> FlagValues<Config>::given() const {
  std::vector<const Row*> out;
  for (const auto& entry : values_) out.push_back(entry.first);
  return out;
}

template <class Config>
bool FlagValues<Config>::was_given(std::string_view key) const {
  return std::any_of(values_.begin(), values_.end(),
                     [&](const auto& entry) { return entry.first->key() == key; });
}

template class FlagValues<config::TrainConfig>;
template class FlagValues<simulate::SimulateSettings>;

config::TrainConfig SettingFlags::apply(config::TrainConfig base) const {
  return values_.apply(std::move(base));
}

void SettingFlags::add_config_option(CLI::App& cmd) {
  cmd.add_option("--config", config_file_,
                 "read the settings from this config.json first (a run directory's, or written "
                 "by hand; keys as in config.json); flags given as well override them");
}

namespace {

// A resume continues the recorded run: a setting its checkpoints depend on (the table's
// fixed_across_resume rows) may not be given another value; the others may (more epochs, another
// learning rate, device or time-out), and are reported.
void check_resume_changes(const config::TrainConfig& recorded, const config::TrainConfig& now,
                          const std::string& source, bool report) {
  std::vector<std::string> refused, changed;
  for (const config::Setting* s : config::training_settings()) {
    const auto then = s->get(recorded), current = s->get(now);
    if (then == current || s->key() == "resume" || s->key() == "run_dir") continue;
    const auto line =
        fmt::format("{}: {} recorded, {} given", s->flag(), s->text(recorded), s->text(now));
    (s->fixed_across_resume() ? refused : changed).push_back(line);
  }
  if (!refused.empty()) {
    throw InputError(fmt::format(
        "--resume continues the run of {} and these flags contradict it (a resume must keep "
        "them; leave them out to take the recorded values): {}",
        source, fmt::join(refused, "; ")));
  }
  if (report && !changed.empty()) {
    spdlog::info("--resume: settings of {}, except {}", source, fmt::join(changed, "; "));
  }
}

}  // namespace

std::string SettingFlags::recorded_config() const {
  if (!config_file_.empty()) return config_file_;
  const config::TrainConfig flags = apply({});
  if (!flags.resume || flags.run_dir.empty()) return {};
  const auto file = std::filesystem::path(flags.run_dir) / run::kRunConfigFile;
  return std::filesystem::exists(file) ? file.string() : std::string();
}

config::TrainConfig SettingFlags::configuration() const {
  const std::string source = recorded_config();
  config::TrainConfig base;
  if (!source.empty()) base = run::read_run_config(source).settings;
  config::TrainConfig config = apply(base);
  if (config.resume && !source.empty()) {
    check_resume_changes(base, config, source, config_file_.empty());
  }
  config::validate(config);
  return config;
}

}  // namespace sgp::cli
