#include "training_flags.hpp"

#include <CLI/CLI.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

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
  cmd.add_option("--max-iterations", c.max_iterations,
                 "stop after this many iterations (0: no limit)")
      ->check(CLI::NonNegativeNumber)
      ->group(optim);
  cmd.add_option("--batch-size", c.batch_size, "mini-batch size per peer")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group(optim);
  cmd.add_option("--lr", c.lr, "base learning rate")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber)
      ->group(optim);
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
  cmd.add_option("--lr-milestones", c.lr_milestones,
                 "epochs at which step decay multiplies the lr by --lr-gamma")
      ->delimiter(',')
      ->group(optim);
  cmd.add_option("--lr-gamma", c.lr_gamma, "step-decay factor")
      ->capture_default_str()
      ->group(optim);
  cmd.add_option("--momentum", c.momentum, "SGD momentum")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0))
      ->group(optim);
  cmd.add_flag("--nesterov,!--no-nesterov", c.nesterov, "Nesterov momentum (default on)")
      ->group(optim);
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

void add_security_flags(CLI::App& cmd, std::string& keys_dir, bool& insecure,
                        const std::string& group) {
  cmd.add_option("--keys", keys_dir,
                 "directory with this process's CURVE secret key (`sgp keygen`); needed when the "
                 "topology has public keys")
      ->group(group);
  cmd.add_flag("--insecure", insecure,
               "without keys, allow endpoints other than loopback (unauthenticated, "
               "unencrypted: anyone who can reach a port can pose as a peer)")
      ->group(group);
}

void add_peer_flags(CLI::App& cmd, peer::TrainConfig& c) {
  const char* group = "Peers and gossip";
  cmd.add_option("--topology", c.topology,
                 "topology file (Graphviz DOT with an endpoint per node; see `sgp topology`)")
      ->required()
      ->check(CLI::ExistingFile)
      ->group(group);
  cmd.add_option("--algo", c.algo,
                 "sgp (synchronous push-sum), osgp (overlapped, see --tau), local (no "
                 "communication), dpsgd (symmetric gossip, undirected topology), exact (complete "
                 "topology: exact averaging, for comparison)")
      ->capture_default_str()
      ->check(CLI::IsMember({"sgp", "osgp", "local", "dpsgd", "exact"}))
      ->group(group);
  cmd.add_option("--tau", c.tau, "osgp: how many rounds an in-neighbour may lag behind")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber)
      ->group(group);
  cmd.add_option("--gossip-every", c.gossip_every, "gossip once every H iterations")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group(group);
  cmd.add_option("--self-weight", c.self_weight,
                 "mixing rate a in (0, 1): keep a, push (1 - a) spread over the out-neighbours "
                 "(overrides the file's weights; 0 = use the file)")
      ->check(CLI::Range(0.0, 1.0))
      ->group(group);
  cmd.add_option("--timeout-ms", c.timeout_ms,
                 "a neighbour's message missing this long fails the run, naming the neighbour")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group(group);
  cmd.add_option("--checkpoint-every", c.checkpoint_every,
                 "write a checkpoint every C iterations into <run-dir>/checkpoints (0: never)")
      ->check(CLI::NonNegativeNumber)
      ->group(group);
  cmd.add_flag("--resume", c.resume, "continue from the newest checkpoint that every peer finished")
      ->group(group);
  cmd.add_option("--monitor", c.monitor,
                 "endpoint of the consensus monitor to hand snapshots to (best effort)")
      ->group(group);
  add_security_flags(cmd, c.keys_dir, c.insecure, group);
}

std::vector<std::string> training_arguments(const peer::TrainConfig& c) {
  std::vector<std::string> a;
  auto add = [&a](const char* flag, const auto& value) {
    a.push_back(flag);
    a.push_back(fmt::format("{}", value));
  };
  add("--hidden", fmt::format("{}", fmt::join(c.hidden, ",")));
  if (!c.data_dir.empty()) add("--data-dir", c.data_dir);
  add("--seed", c.seed);
  add("--epochs", c.epochs);
  add("--max-iterations", c.max_iterations);
  add("--batch-size", c.batch_size);
  add("--lr", c.lr);
  add("--lr-scaling", c.lr_scaling);
  add("--warmup-epochs", c.warmup_epochs);
  add("--lr-decay", c.lr_decay);
  if (!c.lr_milestones.empty())
    add("--lr-milestones", fmt::format("{}", fmt::join(c.lr_milestones, ",")));
  add("--lr-gamma", c.lr_gamma);
  add("--momentum", c.momentum);
  a.push_back(c.nesterov ? "--nesterov" : "--no-nesterov");
  add("--weight-decay", c.weight_decay);
  add("--device", c.device);
  add("--blas-threads", c.blas_threads);
  if (c.tf32) a.push_back("--tf32");
  if (!c.run_dir.empty()) add("--run-dir", c.run_dir);
  add("--log-every", c.log_every);
  add("--eval-every", c.eval_every_epochs);
  add("--log-level", c.log_level);
  add("--topology", c.topology);
  add("--algo", c.algo);
  add("--tau", c.tau);
  add("--gossip-every", c.gossip_every);
  add("--self-weight", c.self_weight);
  add("--timeout-ms", c.timeout_ms);
  add("--checkpoint-every", c.checkpoint_every);
  if (c.resume) a.push_back("--resume");
  if (!c.monitor.empty()) add("--monitor", c.monitor);
  if (!c.keys_dir.empty()) add("--keys", c.keys_dir);
  if (c.insecure) a.push_back("--insecure");
  return a;
}

}  // namespace sgp::cli
