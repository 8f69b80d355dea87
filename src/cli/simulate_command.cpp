// `sgp simulate`: thousands of push-sum peers in one process (sgp/simulate/simulate_run.hpp).
#include <CLI/CLI.hpp>

#include <memory>
#include <thread>
#include <tuple>

#include "commands.hpp"
#include "sgp/error.hpp"
#include "sgp/log.hpp"
#include "sgp/simulate/simulate_run.hpp"

namespace sgp::cli {
namespace {

struct SimulateArgs {
  simulate::SimulateCommand command;
  std::string algo = "sgp";
  std::string mode = "sync";
  std::string momentum_kind = "local";
  std::string workload = "consensus";
  bool no_running_sums = false;
  bool no_predict = false;
  double self_weight = 0.0;
  std::string fail;
  std::string join;
  std::string log_level = "info";
  double slow_momentum = 0.0;
  std::string compress;
};

// --algo sgp|asgp|gt|agt, or the older --mode sync|async (sgp|asgp); both only if they agree.
void set_algorithm(SimulateArgs& a, const CLI::App& cmd) {
  auto& o = a.command.options;
  const bool async_algo = a.algo == "asgp" || a.algo == "agt";
  if (cmd.count("--mode") > 0 && cmd.count("--algo") > 0 && (a.mode == "async") != async_algo) {
    throw InputError(fmt::format(
        "sgp simulate: --mode {} contradicts --algo {} (sgp and gt are synchronous, asgp and agt "
        "asynchronous; --mode is the older name: give --algo alone)",
        a.mode, a.algo));
  }
  const bool async = cmd.count("--algo") > 0 ? async_algo : a.mode == "async";
  o.mode = async ? simulate::MixingMode::async : simulate::MixingMode::sync;
  o.optimizer.gradient_tracking = a.algo == "gt" || a.algo == "agt";
  o.optimizer.momentum_kind = a.momentum_kind == "quasi-global"
                                  ? simulate::MomentumKind::quasi_global
                                  : simulate::MomentumKind::local;
  if (cmd.count("--slow-momentum") > 0) o.optimizer.slow_momentum = a.slow_momentum;
}

void check_combinations(const SimulateArgs& a, const CLI::App& cmd) {
  const auto& o = a.command.options;
  if (o.mode == simulate::MixingMode::sync) {
    for (const char* flag : {"--drop", "--dup", "--delay", "--no-running-sums"}) {
      if (cmd.count(flag) > 0) {
        throw InputError(fmt::format(
            "sgp simulate: {} needs an asynchronous algorithm, --algo asgp or agt (--mode async): "
            "synchronous push-sum, as sgp, loses no message",
            flag));
      }
    }
  }
  if (o.workload == simulate::Workload::consensus) {
    for (const char* flag : {"--lr", "--noise", "--spread"}) {
      if (cmd.count(flag) > 0) {
        throw InputError(fmt::format(
            "sgp simulate: {} is for --workload quadratic (consensus has no steps)", flag));
      }
    }
  }
}

void add_mixing_options(CLI::App* cmd, SimulateArgs& a) {
  auto& o = a.command.options;
  cmd->add_option(
         "--algo", a.algo,
         "sgp (synchronous push-sum, float32, PushSumEngine's rounds), asgp "
         "(asynchronous: running sums, message faults, double), gt or agt (the same with "
         "gradient tracking: a tracker y of the mean gradient mixed with x in one message)")
      ->capture_default_str()
      ->check(CLI::IsMember({"sgp", "asgp", "gt", "agt"}));
  cmd->add_option("--mode", a.mode, "the older name: sync = --algo sgp, async = --algo asgp")
      ->check(CLI::IsMember({"sync", "async"}));
  cmd->add_flag("--no-running-sums", a.no_running_sums,
                "async: plain push-sum (a lost message's mass is gone), to measure the bias");
  cmd->add_option("--drop", o.faults.drop, "async: probability that a message is lost")
      ->check(CLI::Range(0.0, 0.99));
  cmd->add_option("--dup", o.faults.duplicate, "async: probability that a message arrives twice")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--compress", a.compress,
                  "sgp, consensus: compressed gossip with public copies and error feedback, "
                  "topk:R | randk:R (fraction R of the coordinates) | sign | qsgd:LEVELS");
  cmd->add_option("--consensus-step", o.consensus_step,
                  "with --compress: the consensus step gamma in (0, 1] (default: R for "
                  "topk/randk, 0.005 for sign, 1 / (1 + omega) for qsgd)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--delay", o.faults.max_delay,
                  "async: each message arrives 0..this many rounds late (uniform)")
      ->check(CLI::Range(0, 1000));
}

void add_workload_options(CLI::App* cmd, SimulateArgs& a) {
  auto& o = a.command.options;
  cmd->add_option("--workload", a.workload,
                  "consensus (no steps: average vectors with a known mean) or quadratic "
                  "(decentralized SGD on per-peer least squares with a known optimum)")
      ->capture_default_str()
      ->check(CLI::IsMember({"consensus", "quadratic"}));
  cmd->add_option("--lr", o.lr, "quadratic: step size")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--noise", o.noise, "quadratic: gradient noise, standard deviation")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--spread", o.spread,
                  "quadratic: heterogeneity (how far apart the peers' own optima lie)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--momentum", o.optimizer.momentum, "quadratic, sgp/asgp: momentum beta")
      ->check(CLI::Range(0.0, 0.999999));
  cmd->add_option("--momentum-kind", a.momentum_kind,
                  "local (m <- beta m + g, as the peers' SGD) or quasi-global (Lin et al.: m "
                  "follows (z_before - z_after) / lr of the mixed model)")
      ->capture_default_str()
      ->check(CLI::IsMember({"local", "quasi-global"}));
  cmd->add_option("--global-average-every", o.optimizer.global_average_every,
                  "quadratic, sgp: every H-th round is an exact average of z instead of gossip "
                  "(Gossip-PGA; 0 = never)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1000000000}));
  cmd->add_option("--slow-momentum", a.slow_momentum,
                  "with --global-average-every: SlowMo's outer momentum beta_s at each exact "
                  "average (0: the PGA average itself)")
      ->check(CLI::Range(0.0, 0.999999));
}

void add_topology_options(CLI::App* cmd, SimulateArgs& a) {
  auto& c = a.command;
  cmd->add_option("--topology", c.topology,
                  "a kind of `sgp topology generate` (ring, torus, exponential, "
                  "one-peer-exponential, random-regular, ...) or a DOT file")
      ->required();
  cmd->add_option("--peers", c.peers, "N, for a kind (a file fixes N itself)")
      ->check(CLI::Range(2, 65535));
  cmd->add_option("--self-weight", a.self_weight,
                  "mixing rate a in (0, 1): keep a, spread 1 - a over the out-neighbours "
                  "(default: uniform over out-degree + 1)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--degree", c.degree,
                  "random-regular: out-degree (default ceil(log2 N)); hyper-hypercube, base: at "
                  "most k neighbours per round (default 1)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--topology-seed", c.topology_seed,
                  "random-regular, one-peer-random-shift: graph seed")
      ->capture_default_str();
}

void add_run_options(CLI::App* cmd, SimulateArgs& a) {
  auto& c = a.command;
  auto& o = c.options;
  cmd->add_option("--dim", o.dim, "D: values per peer")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 28));
  cmd->add_option("--rounds", o.rounds, "gossip rounds")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000000));
  cmd->add_option("--seed", o.seed, "initial vectors, shards, gradient noise and message faults")
      ->capture_default_str();
  cmd->add_option("--threads", o.threads, "threads that run the peers")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_option("--log-every", o.log_every, "a simulate.jsonl record every this many rounds")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000000));
  cmd->add_option("--fail", a.fail,
                  "RANK@ROUND[,...]: the rank fails at the start of that round; its mass is gone, "
                  "the survivors restart from z with w = 1 and mix over the repaired schedule "
                  "(asgp's exclusion, noticed at once)");
  cmd->add_option("--join", a.join,
                  "RANK@ROUND[,...]: a failed rank rejoins; the first live rank after it gives "
                  "it half of its mass (asgp's --join)");
  cmd->add_flag("--no-predict", a.no_predict,
                "skip the predicted sigma and rho (dense O(N^3); done up to 1024 peers)");
  cmd->add_option("--run-dir", c.run_dir, "run directory (default runs/simulate-<time>)");
  cmd->add_flag("--overwrite", c.overwrite, "delete sgp's results in --run-dir first");
  cmd->add_option("--log-level", a.log_level, "debug, info, warn, error or off")
      ->capture_default_str();
}

void run_simulate_args(SimulateArgs& a, const CLI::App& cmd) {
  auto& c = a.command;
  set_algorithm(a, cmd);
  c.options.workload =
      a.workload == "consensus" ? simulate::Workload::consensus : simulate::Workload::quadratic;
  c.options.running_sums = !a.no_running_sums;
  c.options.faults.seed = c.options.seed;
  c.predict = !a.no_predict;
  if (cmd.count("--self-weight") > 0) {
    if (!(a.self_weight > 0.0 && a.self_weight < 1.0)) {
      throw InputError(fmt::format("--self-weight {}: must be in (0, 1)", a.self_weight));
    }
    c.self_weight = a.self_weight;
  }
  c.options.changes.clear();
  for (const auto& [text, kind, flag] :
       {std::tuple(a.fail, simulate::PeerChange::Kind::fail, "--fail"),
        std::tuple(a.join, simulate::PeerChange::Kind::join, "--join")}) {
    if (cmd.count(flag) == 0) continue;
    auto changes = simulate::parse_peer_changes(text, kind, flag);
    c.options.changes.insert(c.options.changes.end(), changes.begin(), changes.end());
  }
  if (cmd.count("--compress") > 0) {
    c.options.compressor = compress::parse_compressor(a.compress, "--compress");
  }
  if (cmd.count("--consensus-step") > 0 && !(c.options.consensus_step > 0.0)) {
    throw InputError(
        fmt::format("--consensus-step {}: expected gamma in (0, 1]", c.options.consensus_step));
  }
  check_combinations(a, cmd);
  simulate::require_valid_optimizer(c.options);
  configure_logging(-1, parse_name<LogLevel>(a.log_level, "--log-level"));
  simulate::run_simulate(c);
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto a = std::make_shared<SimulateArgs>();
  a->command.options.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  CLI::App* cmd = app.add_subcommand(
      "simulate",
      "Simulate N push-sum peers in this process, round by round on a few threads (no socket or "
      "thread per peer), with the same topology schedules and push-sum arithmetic as real peers: "
      "sgp = PushSumEngine's rounds, asgp = running sums with seeded message loss, duplication "
      "and delay, gt/agt = the same with gradient tracking. Workloads: consensus on vectors with "
      "a known mean, or decentralized SGD (momentum, quasi-global momentum, periodic global "
      "averaging, slow momentum) on a heterogeneous least-squares problem with a known optimum. "
      "Writes simulate.jsonl (one record per logged round), summary.json (final figures, "
      "measured vs predicted contraction per period) and config.json to the run directory; plot "
      "with scripts/plot RUN_DIR.");
  add_topology_options(cmd, *a);
  add_mixing_options(cmd, *a);
  add_workload_options(cmd, *a);
  add_run_options(cmd, *a);
  cmd->callback([a, cmd] { run_simulate_args(*a, *cmd); });
}

}  // namespace sgp::cli
