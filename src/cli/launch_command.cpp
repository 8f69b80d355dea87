// `sgp launch`: the peers of a topology that live on this host, plus the monitor when all do.
#include <CLI/CLI.hpp>

#include <memory>

#include "commands.hpp"
#include "setting_flags.hpp"
#include "sgp/launch/launcher.hpp"
#include "sgp/log.hpp"

namespace sgp::cli {

namespace {

// sgp launch [flags] -- COMMAND ARGS: everything after `--` is the program and its arguments.
void add_program_option(CLI::App& cmd, std::vector<std::string>& command) {
  cmd.add_option("command", command,
                 "after --: a program to run once per rank instead of sgp's own peer (e.g. "
                 "-- /usr/bin/python3 examples/mnist_mlp.py), with RANK, WORLD_SIZE, LOCAL_RANK, "
                 "SGP_CONFIG, SGP_TOPOLOGY, SGP_RUN_DIR, SGP_MONITOR and SGP_KEYS in its "
                 "environment (python/README.md)")
      ->type_name("COMMAND ARGS");
}

}  // namespace

void add_launch_command(CLI::App& app) {
  auto options = std::make_shared<launch::LaunchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "launch",
      "Start every peer of the topology whose endpoint is on this host (or --ranks), and the "
      "consensus monitor when all peers are here; show their progress, forward Ctrl-C, report a "
      "peer that dies, and write <run-dir>/summary.json. On several hosts, run the same command "
      "with the same topology file on each (and `sgp monitor` by hand, with --monitor).");
  cmd->add_option("--ranks", options->ranks,
                  "ranks to start here (default: those with a local endpoint)")
      ->delimiter(',');
  cmd->add_flag("--no-monitor", options->no_monitor, "do not start the consensus monitor");
  cmd->add_option("--base-port", options->base_port,
                  "re-address the topology's ports: each rank keeps its host and listens on this "
                  "port plus the number of lower ranks there (written to "
                  "<run-dir>/topology-readdressed.dot, which the peers read); 0: each rank this "
                  "launch starts gets a free port, held for it until it listens (as for a "
                  "topology endpoint with port 0)")
      ->check(CLI::Range(0, 65535));
  add_program_option(*cmd, options->command);
  auto prepare_only = std::make_shared<bool>(false);
  cmd->add_flag("--prepare-only", *prepare_only,
                "check the settings and the topology, write <run-dir>/config.json and exit: for "
                "peers and a monitor another launcher starts with --config (scripts/sbatch-sgp)");
  auto flags = SettingFlags::add(*cmd, true);
  flags->add_config_option(*cmd);
  cmd->callback([flags, options, prepare_only] {
    launch::LaunchOptions o = *options;
    o.config = flags->configuration();
    configure_logging(-1, o.config.log_level);
    if (*prepare_only) {
      launch::prepare_run(o.config, o.base_port);
    } else {
      launch::launch_peers(std::move(o));
    }
  });
}

}  // namespace sgp::cli
