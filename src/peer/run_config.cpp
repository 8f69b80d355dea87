#include "sgp/peer/run_config.hpp"

#include <array>

#include <fmt/format.h>
#include <fmt/std.h>
#include <nlohmann/json.hpp>

#include "sgp/peer/run_directory.hpp"
#include "sgp/peer/settings.hpp"

namespace sgp::peer {

namespace {
constexpr std::array<std::string_view, 3> kMetadataKeys = {"command", "peers", "run_id"};
}

void write_run_config(const RunDirectory& run, const TrainConfig& settings,
                      std::string_view command, int peers) {
  nlohmann::json j = settings;
  // What this start did, not a setting of the run: a copy of config.json must not delete it.
  j["overwrite"] = false;
  j["run_id"] = run.run_id();
  j["command"] = command;
  j["peers"] = peers;
  run.write_json(std::string(kRunConfigFile), j);
}

RunConfig read_run_config(const std::filesystem::path& file) {
  auto j = read_json_file(file);
  if (!j) throw InputError(fmt::format("{}: cannot read it as a JSON file", file.string()));
  if (j->contains("eval_every_epochs") && !j->contains("eval_every")) {  // written before 0.2
    (*j)["eval_every"] = (*j)["eval_every_epochs"];
  }
  j->erase("eval_every_epochs");
  RunConfig out;
  out.settings = settings_from_json(*j, file.string(), kMetadataKeys);
  out.command = j->value("command", "");
  out.peers = j->value("peers", 0);
  return out;
}

}  // namespace sgp::peer
