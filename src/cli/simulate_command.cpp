// `sgp simulate`: thousands of push-sum peers in one process (sgp/simulate/simulate_run.hpp). Its
// flags are the rows of sgp simulate's settings table (sgp/simulate/simulate_settings.hpp).
#include <CLI/CLI.hpp>

#include <memory>

#include "commands.hpp"
#include "setting_flags.hpp"
#include "sgp/log.hpp"
#include "sgp/simulate/simulate_run.hpp"

namespace sgp::cli {
namespace {

void run_simulate_flags(const FlagValues<simulate::SimulateSettings>& flags) {
  const simulate::SimulateSettings settings = flags.apply({});
  simulate::GivenKeys given;
  for (const auto* row : flags.given()) given.emplace(row->key());
  if (!given.contains("topology")) throw InputError("sgp simulate: --topology is required");
  const auto command = simulate::simulate_command(settings, given);
  configure_logging(-1, settings.log_level);
  simulate::run_simulate(command);
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto flags = std::make_shared<FlagValues<simulate::SimulateSettings>>();
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
  const simulate::SimulateSettings defaults;
  for (auto rows : {simulate::simulate_settings(), simulate::simulate_setting_aliases()}) {
    for (const auto* row : rows) flags->add_flag(*cmd, *row, defaults);
  }
  cmd->callback([flags] { run_simulate_flags(*flags); });
}

}  // namespace sgp::cli
