#include "sgp/peer/run_config.hpp"

#include <array>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <fmt/std.h>
#include <nlohmann/json.hpp>

#include "sgp/peer/run_directory.hpp"
#include "sgp/peer/settings.hpp"
#include "sgp/topology/schedule.hpp"

namespace sgp::peer {

namespace {
constexpr std::array<std::string_view, 4> kMetadataKeys = {"command", "peers", "run_id",
                                                           "mixing_self_weights"};

std::vector<double> self_weights(const topology::Schedule& s) {
  std::set<double> kept;
  for (int phase = 0; phase < s.period(); ++phase)
    for (int rank = 0; rank < s.num_peers(); ++rank) kept.insert(s.self_weight(rank, phase));
  return {kept.begin(), kept.end()};
}
}  // namespace

void write_run_config(const RunDirectory& run, const TrainConfig& settings,
                      std::string_view command, int peers, const topology::Schedule* mixing) {
  nlohmann::json j = settings;
  if (mixing) j["mixing_self_weights"] = self_weights(*mixing);
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
