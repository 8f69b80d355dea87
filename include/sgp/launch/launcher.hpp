#pragma once
// `sgp launch`: starts the peers of a topology that live on this host (each an `sgp peer`
// process reading the run's config.json) and, when every peer is here, the consensus monitor;
// logs their combined progress, forwards Ctrl-C, reports a peer that dies, and merges the results
// into <run-dir>/summary.json.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "sgp/config/train_config.hpp"
#include "sgp/launch/run_summary.hpp"

namespace sgp::topology {
class Schedule;
}

namespace sgp::launch {

struct LaunchOptions {
  config::TrainConfig config;
  std::vector<int> ranks;   // empty: the ranks whose endpoint is on this host
  bool no_monitor = false;  // do not run the monitor even when every peer is local
  // Re-address the topology's ports: each rank keeps its host and listens on base_port + the
  // number of lower ranks there (the topology used goes to <run-dir>/topology-readdressed.dot).
  std::optional<int> base_port;
  // sgp launch ... -- COMMAND ARGS: run this program once per rank instead of `sgp peer`, with
  // its rank and the run's settings in its environment (launch/program_ranks.hpp).
  std::vector<std::string> command;
};

// The ranks of `schedule` whose endpoint host is one of this machine's names or addresses
// (or any 127.x address).
std::vector<int> ranks_on_this_host(const topology::Schedule& schedule);

// Checks the settings and reads the topology, then writes <run-dir>/config.json and returns the
// run directory, starting nothing: for peers and a monitor started by another launcher (srun, in
// scripts/sbatch-sgp), each reading that one file with --config.
std::filesystem::path prepare_run(config::TrainConfig config,
                                  std::optional<int> base_port = std::nullopt);

// Runs the peers to the end. Returns the run's merged summary (also written to summary.json).
// IoError when a peer fails (naming it; the others are stopped); Interrupted on Ctrl-C / SIGTERM,
// whenever it comes, once every peer is stopped and the run's secrets are removed. With
// --on-peer-failure continue (the default for asgp) the others go on, the failed ranks are
// listed in the summary, and only a run where every local peer failed is an error.
run::RunSummary launch_peers(LaunchOptions options);

}  // namespace sgp::launch
