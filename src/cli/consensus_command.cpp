// `sgp consensus`: pure push-sum average consensus over ZeroMQ (sgp/launch/consensus_run.hpp).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <array>
#include <memory>
#include <string_view>
#include <vector>

#include <fmt/ranges.h>

#include "commands.hpp"
#include "setting_flags.hpp"
#include "sgp/config/algorithm.hpp"
#include "sgp/config/engine_settings.hpp"
#include "sgp/error.hpp"
#include "sgp/launch/consensus_run.hpp"
#include "sgp/log.hpp"
#include "sgp/topology/analysis.hpp"
#include "sgp/topology/dot_file.hpp"

namespace sgp::cli {
namespace {

// The algorithms sgp consensus runs, by the algorithm table's names: one per engine mode.
constexpr std::array kConsensusAlgorithms = {config::Algorithm::sgp, config::Algorithm::osgp,
                                             config::Algorithm::asgp, config::Algorithm::allreduce};

std::string consensus_algorithm_names() {
  std::vector<std::string_view> names;
  for (auto algo : kConsensusAlgorithms) names.push_back(name_of(algo));
  return fmt::format("{}", fmt::join(names, ", "));
}

// --algo, or the older --mode sync|overlap|async|allreduce (the engine's mode); both only if
// they agree.
config::Algorithm consensus_algorithm(const CLI::App& cmd, const std::string& algo_text,
                                      const std::string& mode_text) {
  const auto algo = parse_name<config::Algorithm>(algo_text, "--algo");
  if (std::ranges::find(kConsensusAlgorithms, algo) == kConsensusAlgorithms.end()) {
    throw InputError(
        fmt::format("--algo {}: sgp consensus runs {}", algo_text, consensus_algorithm_names()));
  }
  if (cmd.count("--mode") == 0) return algo;
  const auto mode = parse_name<gossip::Mode>(mode_text, "--mode");
  const auto by_mode = std::ranges::find_if(kConsensusAlgorithms,
                                            [&](auto a) { return config::info(a).mode == mode; });
  SGP_ENFORCE(by_mode != kConsensusAlgorithms.end(), "no algorithm of mode {}", mode_text);
  if (cmd.count("--algo") > 0 && *by_mode != algo) {
    throw InputError(
        fmt::format("--mode {} contradicts --algo {} (--mode is the older name: give --algo alone)",
                    mode_text, algo_text));
  }
  return *by_mode;
}

}  // namespace

void add_consensus_command(CLI::App& app) {
  struct Args {
    launch::ConsensusOptions options;
    std::string algo = "sgp";
    std::string mode;
    bool local = false;
    int rank = -1;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "consensus",
      "Pure push-sum average consensus over ZeroMQ (no training): every peer starts from a "
      "seeded vector whose global mean is known exactly, and reports its distance to it every "
      "round. Run one peer with --rank, or every peer of the topology on this host with --local.");
  cmd->add_option("--topology", a->options.topology, "topology DOT file with an endpoint per node")
      ->required();
  cmd->add_flag("--local", a->local, "spawn every peer of the topology as a process on this host");
  cmd->add_option("--rank", a->rank, "run this one peer");
  cmd->add_option("--rounds", a->options.rounds, "gossip rounds")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000000));
  cmd->add_option(
         "--algo", a->algo,
         "sgp (synchronous push-sum), osgp (overlapped), asgp (acknowledged pushes, "
         "nobody waits) or allreduce (ring AllReduce over ranks 0..N-1, whatever the edges)")
      ->capture_default_str();
  cmd->add_option("--mode", a->mode,
                  "the older name of --algo: sync (sgp), overlap (osgp), async (asgp), allreduce");
  cmd->add_option("--dim", a->options.dim, "vector length (floats)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 28));
  auto credentials = std::make_shared<std::string>();
  cmd->add_option("--run-credentials", *credentials,
                  "set by sgp consensus --local: the file with this peer's per-run passwords; "
                  "read once, then removed");
  config::TrainConfig defaults;
  defaults.device = "cpu";  // vector arithmetic: a GPU only when asked for
  auto flags = SettingFlags::add(*cmd, launch::kConsensusSettings, defaults);
  cmd->callback([a, cmd, flags, defaults, credentials] {
    if (a->local == (a->rank >= 0)) {
      throw InputError("sgp consensus: give exactly one of --local (every peer) or --rank R");
    }
    launch::ConsensusOptions o = a->options;
    o.shared = flags->apply(defaults);
    o.shared.algo = consensus_algorithm(*cmd, a->algo, a->mode);
    o.mode = config::info(o.shared.algo).mode;
    o.shared.run_credentials = *credentials;
    config::validate(o.shared);
    config::require_compression_applies(o.shared, o.shared.device == "cpu");
    configure_logging(a->local ? -1 : a->rank, o.shared.log_level);
    topology::DotReadOptions read_options;
    read_options.require_endpoints = true;
    const auto schedule = topology::read_dot_file(o.topology, read_options);
    topology::require_strongly_connected(schedule, o.topology);
    if (a->rank >= schedule.num_peers()) {
      throw InputError(fmt::format("--rank {}: the topology {} has ranks 0..{}", a->rank,
                                   o.topology, schedule.num_peers() - 1));
    }
    if (a->local) {
      launch::run_consensus_local(o, schedule);
    } else {
      launch::run_consensus_peer(o, schedule, a->rank);
    }
  });
}

}  // namespace sgp::cli
