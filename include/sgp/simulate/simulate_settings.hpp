#pragma once
// sgp simulate's settings table: every option declared once (simulate_settings.cpp) with its key,
// group, help, type, default (in SimulateSettings) and allowed values, built with the training
// settings' machinery (config/setting_types.hpp). Everything that reads or writes simulate
// options iterates it: the flags of `sgp simulate` (--key-with-dashes), the keys of simulate
// sweeps ([simulate], [quick], [grid]; experiment/simulate_sweep) and the run's config.json.
// Adding an option: a field in SimulateSettings, one row, and its use in simulate_command()
// (simulate_run.hpp).
#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sgp/config/settings.hpp"
#include "sgp/log.hpp"
#include "sgp/named_values.hpp"
#include "sgp/simulate/optimizer.hpp"
#include "sgp/simulate/workload.hpp"

namespace sgp::simulate {

// The mixing algorithms sgp simulate runs, by the algorithm table's names (config/algorithm):
// sgp and asgp, and gradient tracking over each (gt; agt, asynchronous gradient tracking, is
// simulate's own).
enum class SimulatedAlgorithm { sgp, asgp, gt, agt };
std::span<const NamedValue<SimulatedAlgorithm>> names(SimulatedAlgorithm);
std::span<const NamedValue<Workload>> names(Workload);
std::span<const NamedValue<MomentumKind>> names(MomentumKind);

// Every option of sgp simulate, as the user gives it.
struct SimulateSettings {
  // The topology
  std::string topology;      // a generator kind, or a DOT file
  int peers = 0;             // for a kind (a file fixes N itself)
  double self_weight = 0.0;  // 0: uniform over out-degree + 1
  int degree = 0;            // 0: the kind's default
  std::uint64_t topology_seed = 0;
  // Mixing
  SimulatedAlgorithm algo = SimulatedAlgorithm::sgp;
  std::string mode;  // the older name of algo: sync (sgp) or async (asgp); "": not given
  bool running_sums = true;
  std::string inject;  // message faults, as peers' --inject: drop=P,dup=P,delay=ROUNDS,seed=S
  std::optional<std::string> compress;
  std::optional<double> consensus_step;
  // The workload and its optimizer
  Workload workload = Workload::consensus;
  double lr = 0.1;
  double noise = 0.0;
  double spread = 1.0;
  double momentum = 0.0;
  MomentumKind momentum_kind = MomentumKind::local;
  std::int64_t global_average_every = 0;
  std::optional<double> slow_momentum;
  // The run
  std::int64_t dim = 1000;
  std::int64_t rounds = 100;
  std::uint64_t seed = 0;
  int threads = default_threads();
  std::int64_t log_every = 1;
  std::vector<std::string> fail;  // RANK@ROUND items
  std::vector<std::string> join;
  bool predict = true;
  std::string run_dir;
  bool overwrite = false;
  LogLevel log_level = LogLevel::info;

  static int default_threads();  // this machine's hardware threads
};

using SimulateSetting = config::BasicSetting<SimulateSettings>;

// Every option, in the order help lists them (config.json writes these).
std::span<const SimulateSetting* const> simulate_settings();
// Old names still read as flags and sweep keys, never written: mode (of algo), and drop, dup
// and delay (each a part of inject).
std::span<const SimulateSetting* const> simulate_setting_aliases();
// The option (or alias) with this key, or nullptr.
const SimulateSetting* find_simulate_setting(std::string_view key);

// The keys of the options given (flags without their dashes, sweep keys): some checks are about
// what was given, not its value (--lr without --workload quadratic).
using GivenKeys = std::set<std::string, std::less<>>;

// Every option as it was set, by key (config.json).
nlohmann::json settings_json(const SimulateSettings& settings);

}  // namespace sgp::simulate
