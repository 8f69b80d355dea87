// `sgp train`: one process, no communication: the local SGD loop every peer runs.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <memory>

#include <fmt/std.h>

#include "commands.hpp"
#include "sgp/compute/device.hpp"
#include "sgp/data/dataset.hpp"
#include "sgp/log.hpp"
#include "sgp/peer/run_directory.hpp"
#include "sgp/peer/train_config.hpp"
#include "sgp/peer/trainer.hpp"
#include "training_flags.hpp"

namespace sgp::cli {

void add_train_command(CLI::App& app) {
  auto config = std::make_shared<peer::TrainConfig>();
  CLI::App* cmd = app.add_subcommand(
      "train",
      "Train the MLP on Fashion-MNIST in this one process, with no communication.\n"
      "Writes <run-dir>/config.json, peer-0.jsonl (one JSON object per logged step) and "
      "summary.json.");
  add_training_flags(*cmd, *config);
  cmd->callback([config] {
    configure_logging(0, config->log_level);
    const auto dir = config->run_dir.empty() ? peer::default_run_dir("train")
                                             : std::filesystem::path(config->run_dir);
    auto backend = compute::make_backend({config->device, config->blas_threads, config->tf32});
    const auto data_dir = data::resolve_data_dir(config->data_dir);
    const auto [train, test] = data::load_fashion_mnist_train_test(data_dir);
    peer::RunDirectory run(dir, 0);
    nlohmann::json recorded = *config;
    recorded["command"] = "train";
    recorded["data_dir"] = data_dir.string();
    run.write_json("config.json", recorded);
    peer::Trainer trainer(*config, 0, 1, *backend, train, test, run);
    const auto summary = trainer.run();
    run.write_json("summary.json", summary);
    spdlog::info("test accuracy {:.2f}%, {:.0f} samples/s; results in {}",
                 100.0 * summary["final_test_accuracy"].get<double>(),
                 summary["samples_per_second"].get<double>(), run.path());
  });
}

}  // namespace sgp::cli
