// `sgp consensus`: pure push-sum average consensus over ZeroMQ (sgp/launch/consensus_run.hpp).
#include <CLI/CLI.hpp>

#include <memory>
#include <string_view>

#include "commands.hpp"
#include "setting_flags.hpp"
#include "sgp/error.hpp"
#include "sgp/launch/consensus_run.hpp"
#include "sgp/log.hpp"
#include "sgp/topology/analysis.hpp"
#include "sgp/topology/dot_file.hpp"

namespace sgp::cli {

void add_consensus_command(CLI::App& app) {
  struct Args {
    launch::ConsensusOptions options;
    std::string mode = "sync";
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
         "--mode", a->mode,
         "sync (SGP), overlap (OSGP), async (asgp: running sums, nobody waits) or allreduce "
         "(ring AllReduce over ranks 0..N-1, whatever the edges)")
      ->capture_default_str();
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
  cmd->callback([a, flags, defaults, credentials] {
    if (a->local == (a->rank >= 0)) {
      throw InputError("sgp consensus: give exactly one of --local (every peer) or --rank R");
    }
    launch::ConsensusOptions o = a->options;
    o.mode = parse_name<gossip::Mode>(a->mode, "--mode");
    o.shared = flags->apply(defaults);
    o.shared.run_credentials = *credentials;
    config::validate(o.shared);
    if (o.shared.compress != gossip::Compression::none) {
      if (o.mode != gossip::Mode::sync && o.mode != gossip::Mode::overlap) {
        throw InputError(fmt::format(
            "--compress {}: only --mode sync and overlap send push-sum rounds of x, not {}",
            name_of(o.shared.compress), a->mode));
      }
      if (o.shared.device != "cpu") {
        throw InputError(fmt::format("--compress {}: compressed payloads need --device cpu, not {}",
                                     name_of(o.shared.compress), o.shared.device));
      }
    }
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
