#include "training_flags.hpp"

#include <CLI/CLI.hpp>

#include "sgp/peer/train_config.hpp"

namespace sgp::cli {

void add_training_flags(CLI::App& cmd, peer::TrainConfig& c) {
  const char* model = "Model and data";
  cmd.add_option("--hidden", c.hidden, "hidden layer widths of the MLP, e.g. --hidden 512,512")
      ->delimiter(',')
      ->capture_default_str()
      ->group(model);
  cmd.add_option("--data-dir", c.data_dir,
                 "directory with the Fashion-MNIST IDX files (default: $SGP_DATA_DIR, else "
                 "/usr/share/datasets/fashion-mnist from the Debian package)")
      ->group(model);
  cmd.add_option("--seed", c.seed, "seed of the initialisation, shard split and batch order")
      ->capture_default_str()
      ->group(model);

  const char* optim = "Optimisation";
  cmd.add_option("--epochs", c.epochs, "epochs over each peer's shard (may be fractional)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group(optim);
  cmd.add_option("--max-iterations", c.max_iterations, "stop after this many iterations (0: no limit)")
      ->check(CLI::NonNegativeNumber)
      ->group(optim);
  cmd.add_option("--batch-size", c.batch_size, "mini-batch size per peer")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group(optim);
  cmd.add_option("--lr", c.lr, "base learning rate")->capture_default_str()->check(CLI::NonNegativeNumber)->group(optim);
  cmd.add_option("--lr-scaling", c.lr_scaling,
                 "none, or linear: lr * (batch * peers) / 256 (the large-batch rule)")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "linear"}))
      ->group(optim);
  cmd.add_option("--warmup-epochs", c.warmup_epochs, "linear learning-rate warm-up, in epochs")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber)
      ->group(optim);
  cmd.add_option("--lr-decay", c.lr_decay, "constant, step (see --lr-milestones) or cosine")
      ->capture_default_str()
      ->check(CLI::IsMember({"constant", "step", "cosine"}))
      ->group(optim);
  cmd.add_option("--lr-milestones", c.lr_milestones, "epochs at which step decay multiplies the lr by --lr-gamma")
      ->delimiter(',')
      ->group(optim);
  cmd.add_option("--lr-gamma", c.lr_gamma, "step-decay factor")->capture_default_str()->group(optim);
  cmd.add_option("--momentum", c.momentum, "SGD momentum")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0))
      ->group(optim);
  cmd.add_flag("--nesterov,!--no-nesterov", c.nesterov, "Nesterov momentum (default on)")->group(optim);
  cmd.add_option("--weight-decay", c.weight_decay, "L2 weight decay")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber)
      ->group(optim);

  const char* compute = "Compute";
  cmd.add_option("--device", c.device,
                 "auto (GPU when usable, else CPU), cpu, cuda or cuda:<index>")
      ->capture_default_str()
      ->group(compute);
  cmd.add_option("--blas-threads", c.blas_threads, "OpenBLAS threads per process (CPU backend)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group(compute);
  cmd.add_flag("--tf32", c.tf32, "allow TF32 tensor-core math in cuBLAS GEMMs")->group(compute);

  const char* report = "Reporting";
  cmd.add_option("--run-dir", c.run_dir, "where to write results (default runs/<command>-<time>)")
      ->group(report);
  cmd.add_option("--log-every", c.log_every, "iterations between records in peer-<rank>.jsonl")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group(report);
  cmd.add_option("--eval-every", c.eval_every_epochs, "epochs between test-accuracy evaluations")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group(report);
  cmd.add_option("--log-level", c.log_level, "trace, debug, info, warn, error or off")
      ->capture_default_str()
      ->group(report);
}

}  // namespace sgp::cli
