#pragma once
// config.json of a run directory: every setting of the run (the settings table's keys) plus
// which command wrote it and for how many peers. `sgp launch` hands it to its peers
// (`sgp peer --config`), and `--resume` reads it back.
#include <filesystem>
#include <string>
#include <string_view>

#include "sgp/peer/train_config.hpp"

namespace sgp::peer {

class RunDirectory;

inline constexpr std::string_view kRunConfigFile = "config.json";

struct RunConfig {
  TrainConfig settings;
  std::string command;  // train, peer, launch
  int peers = 0;
};

void write_run_config(const RunDirectory& run, const TrainConfig& settings,
                      std::string_view command, int peers);
// InputError naming the file and the key when it cannot be read or holds a bad setting.
RunConfig read_run_config(const std::filesystem::path& file);

}  // namespace sgp::peer
