// `sgp monitor`: the passive consensus monitor, started by hand for multi-host runs
// (`sgp launch` runs one itself when every peer is local).
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <array>
#include <atomic>
#include <csignal>
#include <memory>
#include <string_view>

#include "commands.hpp"
#include "setting_flags.hpp"
#include "sgp/config/engine_settings.hpp"
#include "sgp/data/dataset.hpp"
#include "sgp/endpoint.hpp"
#include "sgp/error.hpp"
#include "sgp/launch/program_ranks.hpp"
#include "sgp/launch/run_summary.hpp"
#include "sgp/log.hpp"
#include "sgp/monitor/run_monitor.hpp"
#include "sgp/peer/peer_runner.hpp"
#include "sgp/run/file_names.hpp"
#include "sgp/run/run_config.hpp"
#include "sgp/run/run_directory.hpp"

namespace sgp::cli {

namespace {
std::atomic<bool> g_stop{false};
extern "C" void request_stop(int) { g_stop.store(true); }
// The peers' model (the same settings), and the monitor's CURVE key; --config reads these, the
// algorithm (what its push-sum weights promise) and the topology and run directory from a run's
// config.json.
constexpr std::array<std::string_view, 4> kSettings = {"model", "data_dir", "keys", "insecure"};

}  // namespace

void add_monitor_command(CLI::App& app) {
  struct Options {
    std::string topology, bind = "tcp://127.0.0.1:29400", run_dir;
    std::int64_t until = 0;
    bool consensus_only = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "monitor",
      "Collect the peers' parameter snapshots (peers started with --monitor ENDPOINT) and write, "
      "per evaluation point, the exact relative consensus error and the test accuracy of the "
      "average model to <run-dir>/monitor.jsonl. Never slows training; stops on Ctrl-C. In a "
      "run's directory (config.json there) it then merges summary.json, as `sgp launch` does.");
  cmd->add_option("--topology", o->topology,
                  "the peers' topology file (for the number of peers; default: --config's)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--bind", o->bind,
                  "endpoint to listen on (other hosts' peers: a non-loopback address, with keys "
                  "in the topology or --insecure)")
      ->capture_default_str();
  cmd->add_option("--run-dir", o->run_dir, "where monitor.jsonl goes (default: --config's)");
  cmd->add_option("--until-iteration", o->until,
                  "exit once this iteration is recorded (default with --config: the run's last "
                  "iteration, which every peer evaluates; without: never, stop with Ctrl-C)");
  cmd->add_flag("--consensus-only", o->consensus_only,
                "the peers are a program's (sgp launch -- COMMAND, scripts/sbatch-sgp -- COMMAND), "
                "whose model is not sgp's: record the consensus error only, and take the average "
                "model's accuracy from what the program's rank 0 reports");
  auto flags = SettingFlags::add(*cmd, kSettings);
  flags->add_config_option(*cmd);
  cmd->callback([o, flags] {
    configure_logging(-1, LogLevel::info);
    config::TrainConfig config = flags->configuration();
    if (!o->topology.empty()) config.topology = o->topology;
    if (!o->run_dir.empty()) config.run_dir = o->run_dir;
    if (config.run_dir.empty()) throw InputError("--run-dir: give the directory for monitor.jsonl");
    Endpoint::parse(o->bind, "--bind");
    const auto schedule = peer::load_topology(config);
    const int n = schedule.num_peers();
    run::RunDirectory run(config.run_dir, -1);
    monitor::RunMonitor monitor(config, schedule, config::security(config), run.path(), o->bind,
                                o->consensus_only);
    // With a run's settings: snapshots of its evaluation iterations only (a program's are its
    // own: any), and stop once every peer reported its last iteration (a program's: until
    // stopped).
    std::int64_t until = o->until;
    if (!flags->config_file().empty() && !o->consensus_only) {
      const auto points = monitor.accept_run_evaluations();
      if (until <= 0) until = points.total;
    }
    spdlog::info("monitor listening on {} for {} peers{}", monitor.endpoint(), n,
                 until > 0 ? fmt::format(", until iteration {}", until) : "");
    std::signal(SIGINT, request_stop);
    std::signal(SIGTERM, request_stop);
    monitor.serve(g_stop, until);
    auto summary = monitor.finish();
    if (o->consensus_only) launch::add_program_evaluation(summary, run.path());
    run.write_json(run::kMonitorSummaryFile, summary);
    // In a run's directory (a run's config.json there), the monitor may finish after every
    // launcher: then it is the one that merges summary.json with every peer.
    if (std::filesystem::exists(run.path() / run::kRunConfigFile)) {
      launch::summarize_launch(run.path(), {}, {});
    }
    if (summary.evaluations == 0 && summary.settings_mismatch) {
      throw InputError(fmt::format("the monitor recorded nothing: {}", *summary.settings_mismatch));
    }
  });
}

}  // namespace sgp::cli
