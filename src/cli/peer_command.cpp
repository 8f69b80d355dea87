// `sgp peer`: one SGP peer process (started by `sgp launch`, by hand on each host, or by srun).
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <memory>
#include <optional>

#include "commands.hpp"
#include "sgp/log.hpp"
#include "sgp/peer/peer_runner.hpp"
#include "sgp/peer/train_config.hpp"
#include "training_flags.hpp"

namespace sgp::cli {

void add_peer_command(CLI::App& app) {
  auto config = std::make_shared<peer::TrainConfig>();
  auto rank = std::make_shared<std::optional<int>>();
  CLI::App* cmd = app.add_subcommand(
      "peer",
      "Run one SGP peer: bind its own endpoint from the topology file, train its shard of "
      "Fashion-MNIST, and mix parameters with its neighbours by push-sum.\n"
      "The rank comes from --rank, else $RANK, else $SLURM_PROCID (so `srun sgp peer "
      "--topology FILE` works). Writes <run-dir>/peer-<rank>.jsonl and peer-<rank>-summary.json.");
  cmd->add_option("--rank", *rank, "this peer's rank in the topology (node id)")
      ->check(CLI::NonNegativeNumber);
  add_training_flags(*cmd, *config);
  add_peer_flags(*cmd, *config);
  cmd->callback([config, rank] {
    const int r = peer::resolve_rank(*rank);
    configure_logging(r, config->log_level);
    const auto summary = peer::run_peer(*config, r);
    spdlog::info("done: test accuracy of this peer's model {:.2f}%",
                 100.0 * summary["final_test_accuracy"].get<double>());
  });
}

}  // namespace sgp::cli
