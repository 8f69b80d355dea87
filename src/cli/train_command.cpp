// `sgp train`: one process, no communication: the local SGD loop every peer runs.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <memory>

#include <fmt/std.h>

#include "commands.hpp"
#include "setting_flags.hpp"
#include "sgp/compute/device.hpp"
#include "sgp/data/dataset.hpp"
#include "sgp/log.hpp"
#include "sgp/peer/batch_loader.hpp"
#include "sgp/peer/trainer.hpp"
#include "sgp/run/file_names.hpp"
#include "sgp/run/run_config.hpp"
#include "sgp/run/run_directory.hpp"
#include "sgp/run/run_files.hpp"

namespace sgp::cli {

void add_train_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "train",
      "Train the --model (default the MLP W1) on Fashion-MNIST in this one process, with no "
      "communication (algo local).\n"
      "Writes <run-dir>/config.json, peer-0.jsonl (one JSON object per logged step) and "
      "summary.json.");
  auto flags = SettingFlags::add(*cmd, false);
  flags->add_config_option(*cmd);
  cmd->callback([flags] {
    config::TrainConfig config = flags->configuration();
    // One process mixes with nobody: its config.json and summary say so (not the default sgp).
    config.algo = config::Algorithm::local;
    configure_logging(0, config.log_level);
    const auto dir = config.run_dir.empty() ? run::create_default_run_dir("train")
                                            : std::filesystem::path(config.run_dir);
    auto backend = compute::make_backend({config.device, config.blas_threads, config.tf32});
    config.data_dir = data::resolve_data_dir(config.data_dir).string();
    const auto [train, test] = peer::load_peer_data(config, 0, 1, config.data_dir);
    run::RunDirectory run(dir, 0);
    run.claim({run::run_start_of(config), {}, false});
    run::write_run_config(run, config, "train", 1);
    peer::Trainer trainer(config, 0, 1, *backend, train, test, run);
    const auto summary = trainer.run();
    run::write_model_file(run.path() / "peer-0-model.bin", trainer.trained_model());
    run.write_json(run::kSummaryFile, summary);
    spdlog::info("test accuracy {}, {:.0f} samples/s, peak RSS {:.0f} MiB; results in {}",
                 run::accuracy_text(summary), summary.samples_per_second,
                 static_cast<double>(summary.peak_rss_bytes.value_or(0)) / (1 << 20), run.path());
  });
}

}  // namespace sgp::cli
