// `sgp launch` hands its settings to the peers as flags (training_arguments); parsing those flags
// must give back exactly the same settings, so that no field is lost on the way.
#include <CLI/CLI.hpp>

#include <fstream>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "../src/cli/training_flags.hpp"
#include "sgp/peer/train_config.hpp"
#include "temp_dir.hpp"

TEST_CASE("training_arguments and the training flags round-trip every setting") {
  sgp::testing::TempDir dir;
  std::ofstream(dir / "t.dot") << "digraph G {}\n";
  sgp::peer::TrainConfig c;  // every field away from its default
  c.model = "mlp:17,9";
  c.partition = "dirichlet:0.5";
  c.data_dir = "/data/fm";
  c.seed = 7;
  c.epochs = 2.5;
  c.max_iterations = 123;
  c.batch_size = 48;
  c.lr = 0.25;
  c.lr_scaling = "none";
  c.warmup_epochs = 0.5;
  c.lr_decay = "step";
  c.lr_milestones = {1.0, 2.0};
  c.lr_gamma = 0.5;
  c.momentum = 0.8f;
  c.nesterov = false;
  c.weight_decay = 5e-4f;
  c.device = "cpu";
  c.blas_threads = 2;
  c.tf32 = true;
  c.run_dir = "runs/x";
  c.log_every = 7;
  c.eval_every_epochs = 0.5;
  c.log_level = "debug";
  c.topology = (dir / "t.dot").string();
  c.algo = "osgp";
  c.tau = 3;
  c.gossip_every = 2;
  c.self_weight = 0.3;
  c.timeout_ms = 1234;
  c.checkpoint_every = 40;
  c.resume = true;
  c.monitor = "tcp://127.0.0.1:5000";

  sgp::peer::TrainConfig parsed;
  CLI::App app;
  sgp::cli::add_training_flags(app, parsed);
  sgp::cli::add_peer_flags(app, parsed);
  auto args = sgp::cli::training_arguments(c);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 parses from the back
  app.parse(reversed);
  CHECK(nlohmann::json(parsed).dump(2) == nlohmann::json(c).dump(2));
}
