#include "sgp/run/run_config.hpp"

#include <array>
#include <fstream>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <fmt/std.h>
#include <nlohmann/json.hpp>

#include "sgp/config/settings.hpp"
#include "sgp/error.hpp"
#include "sgp/run/run_directory.hpp"
#include "sgp/topology/schedule.hpp"

namespace sgp::run {

namespace {
constexpr std::array<std::string_view, 5> kMetadataKeys = {
    "command", "peers", "run_id", "mixing_self_weights", "monitor_endpoint"};

// config.json as JSON; InputError naming the file when it is not a JSON object or when an object
// repeats a key (the parser would silently keep the last value).
nlohmann::json read_settings_object(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw InputError(fmt::format("{}: cannot read it", file.string()));
  std::vector<std::set<std::string>> keys_of_open_objects;
  std::string repeated;
  using Event = nlohmann::json::parse_event_t;
  auto note_keys = [&](int, Event event, nlohmann::json& parsed) {
    if (event == Event::object_start) keys_of_open_objects.emplace_back();
    if (event == Event::object_end) keys_of_open_objects.pop_back();
    if (event == Event::key &&
        !keys_of_open_objects.back().insert(parsed.get<std::string>()).second && repeated.empty()) {
      repeated = parsed.get<std::string>();
    }
    return true;
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in, note_keys);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: not valid JSON: {}", file.string(), e.what()));
  }
  if (!repeated.empty()) {
    throw InputError(fmt::format("{}: key \"{}\" appears more than once", file.string(), repeated));
  }
  if (!j.is_object()) {
    throw InputError(fmt::format("{}: expected a JSON object of settings, got {}", file.string(),
                                 j.type_name()));
  }
  return j;
}

std::vector<double> self_weights(const topology::Schedule& s) {
  std::set<double> kept;
  for (int phase = 0; phase < s.period(); ++phase)
    for (int rank = 0; rank < s.num_peers(); ++rank) kept.insert(s.self_weight(rank, phase));
  return {kept.begin(), kept.end()};
}
}  // namespace

void write_run_config(const RunDirectory& run, const config::TrainConfig& settings,
                      std::string_view command, int peers, const topology::Schedule* mixing,
                      std::string_view monitor_endpoint) {
  nlohmann::json j = settings;
  if (mixing) j["mixing_self_weights"] = self_weights(*mixing);
  if (!monitor_endpoint.empty()) j["monitor_endpoint"] = monitor_endpoint;
  // What this start did, not a setting of the run: a copy of config.json must not delete it.
  j["overwrite"] = false;
  j["run_id"] = run.run_id();
  j["command"] = command;
  j["peers"] = peers;
  run.write_json(std::string(kRunConfigFile), j);
}

RunConfig read_run_config(const std::filesystem::path& file) {
  auto j = read_settings_object(file);
  if (j.contains("eval_every_epochs") && !j.contains("eval_every")) {  // written before 0.2
    j["eval_every"] = j["eval_every_epochs"];
  }
  j.erase("eval_every_epochs");
  RunConfig out;
  out.settings = config::settings_from_json(j, file.string(), kMetadataKeys);
  if (j.contains("command") && !j["command"].is_string()) {
    throw InputError(fmt::format("{}: command: expected a string", file.string()));
  }
  if (j.contains("peers") && !j["peers"].is_number_unsigned()) {
    throw InputError(fmt::format("{}: peers: expected an integer >= 0", file.string()));
  }
  out.command = j.value("command", "");
  out.peers = j.value("peers", 0);
  if (j.contains("monitor_endpoint") && !j["monitor_endpoint"].is_string()) {
    throw InputError(fmt::format("{}: monitor_endpoint: expected a string", file.string()));
  }
  out.monitor_endpoint = j.value("monitor_endpoint", "");
  return out;
}

}  // namespace sgp::run
