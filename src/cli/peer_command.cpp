// `sgp peer`: one SGP peer process (started by `sgp launch`, by hand on each host, or by srun).
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <filesystem>
#include <memory>
#include <optional>
#include <string_view>

#include "commands.hpp"
#include "setting_flags.hpp"
#include "sgp/error.hpp"
#include "sgp/log.hpp"
#include "sgp/peer/peer_runner.hpp"
#include "sgp/run/run_config.hpp"

namespace sgp::cli {

namespace {

// Runs `fn`; an IoError it throws names this rank first (a launcher shows many peers' errors,
// and a full disk fails them all: each must say whose it is).
template <class Fn>
auto with_rank_named(int rank, Fn fn) {
  try {
    return fn();
  } catch (const IoError& e) {
    const std::string prefix = fmt::format("rank {}: ", rank);
    if (std::string_view(e.what()).starts_with(prefix)) throw;
    throw IoError(prefix + e.what());
  }
}

// A rank restarted by hand (--join) without --monitor reports to the monitor its launcher
// started, as its first process did: config.json's monitor_endpoint.
void report_to_run_monitor(config::TrainConfig& config, const std::string& config_file) {
  if (!config.monitor.empty() || config_file.empty()) return;
  config.monitor = run::read_run_config(config_file).monitor_endpoint;
  if (!config.monitor.empty())
    spdlog::info("reporting to the run's monitor at {} ({})", config.monitor, config_file);
}

}  // namespace

void add_peer_command(CLI::App& app) {
  auto rank = std::make_shared<std::optional<int>>();
  auto config_file = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "peer",
      "Run one SGP peer: bind its own endpoint from the topology file, train its shard of "
      "Fashion-MNIST, and mix parameters with its neighbours by push-sum.\n"
      "The rank comes from --rank, else $RANK, else $SLURM_PROCID (so `srun sgp peer "
      "--topology FILE` works). Writes <run-dir>/peer-<rank>.jsonl and peer-<rank>-summary.json.");
  cmd->add_option("--rank", *rank, "this peer's rank in the topology (node id)")
      ->check(CLI::NonNegativeNumber);
  auto join = std::make_shared<bool>(false);
  cmd->add_flag("--join", *join,
                "asgp: join a run in progress as this rank (one that died or never started): a "
                "live peer hands over half of its mass and its iteration. Without --monitor it "
                "reports to the monitor recorded in --config's config.json (monitor_endpoint)");
  auto credentials = std::make_shared<std::string>();
  cmd->add_option("--run-credentials", *credentials,
                  "set by sgp launch: the file with this peer's per-run passwords (a keyless run "
                  "on one host); with --join, the run directory's share of this rank when there "
                  "is one");
  auto flags = SettingFlags::add(*cmd, true);
  flags->add_config_option(*cmd);
  cmd->callback([flags, rank, join, credentials] {
    config::TrainConfig config = flags->configuration();
    config.run_credentials = *credentials;
    const int r = peer::resolve_rank(*rank);
    if (*join && credentials->empty())
      config.run_credentials = peer::rejoining_credentials(config, r);
    configure_logging(r, config.log_level);
    if (*join) report_to_run_monitor(config, flags->config_file());
    // Peers started by sgp launch read the run's config.json; they do not write it again.
    const bool have_config =
        !flags->config_file().empty() && !config.run_dir.empty() &&
        std::filesystem::exists(std::filesystem::path(config.run_dir) / run::kRunConfigFile);
    const auto summary = with_rank_named(
        r, [&] { return peer::run_peer(config, r, !have_config && !*join, *join); });
    spdlog::info("done: test accuracy of this peer's model {}", run::accuracy_text(summary));
  });
}

}  // namespace sgp::cli
