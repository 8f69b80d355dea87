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
  std::string mode = "sync";
  std::string workload = "consensus";
  bool no_running_sums = false;
  bool no_predict = false;
  double self_weight = 0.0;
  std::string fail;
  std::string join;
  std::string log_level = "info";
};

void check_combinations(const SimulateArgs& a, const CLI::App& cmd) {
  const auto& o = a.command.options;
  if (o.mode == simulate::MixingMode::sync) {
    for (const char* flag : {"--drop", "--dup", "--delay", "--no-running-sums"}) {
      if (cmd.count(flag) > 0) {
        throw InputError(fmt::format(
            "sgp simulate: {} needs --mode async (sync push-sum, as sgp, loses no message)", flag));
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

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto a = std::make_shared<SimulateArgs>();
  auto& c = a->command;
  auto& o = c.options;
  o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  CLI::App* cmd = app.add_subcommand(
      "simulate",
      "Simulate N push-sum peers in this process, round by round on a few threads (no socket or "
      "thread per peer), with the same topology schedules and push-sum arithmetic as real peers: "
      "sync = SGP (PushSumEngine's rounds), async = asgp (running sums; seeded message loss, "
      "duplication and delay). Workloads: consensus on vectors with a known mean, or SGD on a "
      "heterogeneous least-squares problem with a known optimum. Writes simulate.jsonl (one "
      "record per logged round), summary.json (final figures, measured vs predicted contraction "
      "per period) and config.json to the run directory; plot with scripts/plot RUN_DIR.");
  cmd->add_option("--topology", c.topology,
                  "a kind of `sgp topology generate` (ring, torus, exponential, "
                  "one-peer-exponential, random-regular, ...) or a DOT file")
      ->required();
  cmd->add_option("--peers", c.peers, "N, for a kind (a file fixes N itself)")
      ->check(CLI::Range(2, 65535));
  cmd->add_option("--dim", o.dim, "D: values per peer")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 28));
  cmd->add_option("--rounds", o.rounds, "gossip rounds")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000000));
  cmd->add_option("--mode", a->mode, "sync (SGP, lossless) or async (asgp: running sums, faults)")
      ->capture_default_str()
      ->check(CLI::IsMember({"sync", "async"}));
  cmd->add_flag("--no-running-sums", a->no_running_sums,
                "async: plain push-sum (a lost message's mass is gone), to measure the bias");
  cmd->add_option("--drop", o.faults.drop, "async: probability that a message is lost")
      ->check(CLI::Range(0.0, 0.99));
  cmd->add_option("--dup", o.faults.duplicate, "async: probability that a message arrives twice")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--delay", o.faults.max_delay,
                  "async: each message arrives 0..this many rounds late (uniform)")
      ->check(CLI::Range(0, 1000));
  cmd->add_option("--workload", a->workload,
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
  cmd->add_option("--self-weight", a->self_weight,
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
  cmd->add_option("--seed", o.seed, "initial vectors, shards, gradient noise and message faults")
      ->capture_default_str();
  cmd->add_option("--threads", o.threads, "threads that run the peers")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_option("--log-every", o.log_every, "a simulate.jsonl record every this many rounds")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000000));
  cmd->add_option("--fail", a->fail,
                  "RANK@ROUND[,...]: the rank fails at the start of that round; its mass is gone, "
                  "the survivors restart from z with w = 1 and mix over the repaired schedule "
                  "(asgp's exclusion, noticed at once)");
  cmd->add_option("--join", a->join,
                  "RANK@ROUND[,...]: a failed rank rejoins; the first live rank after it gives "
                  "it half of its mass (asgp's --join)");
  cmd->add_flag("--no-predict", a->no_predict,
                "skip the predicted sigma and rho (dense O(N^3); done up to 1024 peers)");
  cmd->add_option("--run-dir", c.run_dir, "run directory (default runs/simulate-<time>)");
  cmd->add_flag("--overwrite", c.overwrite, "delete sgp's results in --run-dir first");
  cmd->add_option("--log-level", a->log_level, "debug, info, warn, error or off")
      ->capture_default_str();
  cmd->callback([a, cmd] {
    auto& c = a->command;
    c.options.mode = a->mode == "sync" ? simulate::MixingMode::sync : simulate::MixingMode::async;
    c.options.workload =
        a->workload == "consensus" ? simulate::Workload::consensus : simulate::Workload::quadratic;
    c.options.running_sums = !a->no_running_sums;
    c.options.faults.seed = c.options.seed;
    c.predict = !a->no_predict;
    if (cmd->count("--self-weight") > 0) {
      if (!(a->self_weight > 0.0 && a->self_weight < 1.0)) {
        throw InputError(fmt::format("--self-weight {}: must be in (0, 1)", a->self_weight));
      }
      c.self_weight = a->self_weight;
    }
    c.options.changes.clear();
    for (const auto& [text, kind, flag] :
         {std::tuple(a->fail, simulate::PeerChange::Kind::fail, "--fail"),
          std::tuple(a->join, simulate::PeerChange::Kind::join, "--join")}) {
      if (cmd->count(flag) == 0) continue;
      auto changes = simulate::parse_peer_changes(text, kind, flag);
      c.options.changes.insert(c.options.changes.end(), changes.begin(), changes.end());
    }
    check_combinations(*a, *cmd);
    configure_logging(-1, parse_name<LogLevel>(a->log_level, "--log-level"));
    simulate::run_simulate(c);
  });
}

}  // namespace sgp::cli
