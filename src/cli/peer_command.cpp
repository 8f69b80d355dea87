// `sgp peer`: one SGP peer process (started by `sgp launch`, by hand on each host, or by srun).
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <filesystem>
#include <memory>
#include <optional>

#include "commands.hpp"
#include "setting_flags.hpp"
#include "sgp/log.hpp"
#include "sgp/peer/peer_runner.hpp"
#include "sgp/peer/run_config.hpp"

namespace sgp::cli {

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
  auto flags = SettingFlags::add(*cmd, true);
  flags->add_config_option(*cmd);
  cmd->callback([flags, rank] {
    const peer::TrainConfig config = flags->configuration();
    const int r = peer::resolve_rank(*rank);
    configure_logging(r, config.log_level);
    // Peers started by sgp launch read the run's config.json; they do not write it again.
    const bool have_config =
        !flags->config_file().empty() && !config.run_dir.empty() &&
        std::filesystem::exists(std::filesystem::path(config.run_dir) / peer::kRunConfigFile);
    const auto summary = peer::run_peer(config, r, !have_config);
    spdlog::info("done: test accuracy of this peer's model {:.2f}%",
                 100.0 * summary.final_test_accuracy);
  });
}

}  // namespace sgp::cli
