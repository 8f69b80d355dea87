#pragma once
// config.json of a run directory: every setting of the run (the settings table's keys) plus
// which command wrote it and for how many peers. `sgp launch` hands it to its peers
// (`sgp peer --config`), and `--resume` reads it back.
#include <filesystem>
#include <string>
#include <string_view>

#include "sgp/config/train_config.hpp"
#include "sgp/run/file_names.hpp"

namespace sgp::topology {
class Schedule;
}

namespace sgp::run {

class RunDirectory;

struct RunConfig {
  config::TrainConfig settings;
  std::string command;  // train, peer, launch
  int peers = 0;
  // The monitor sgp launch started for this run (its port is this start's only): where a rank
  // restarted by hand (sgp peer --join) reports. Not a setting: a resume binds a new one.
  std::string monitor_endpoint;
};

// With `mixing` (the schedule the peers mix with: the file's weights after --self-weight, or
// the algorithm's own), also "mixing_self_weights": every p_ii kept in any phase, distinct and
// ascending (one value for a regular graph), so that uniform weights are recorded as numbers.
// With `monitor_endpoint`, also "monitor_endpoint" (RunConfig).
void write_run_config(const RunDirectory& run, const config::TrainConfig& settings,
                      std::string_view command, int peers,
                      const topology::Schedule* mixing = nullptr,
                      std::string_view monitor_endpoint = {});
// InputError naming the file and the key when it cannot be read or holds a bad setting.
RunConfig read_run_config(const std::filesystem::path& file);

}  // namespace sgp::run
