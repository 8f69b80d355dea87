#include "sgp/simulate/simulate_settings.hpp"

#include <algorithm>
#include <array>
#include <memory>
#include <thread>
#include <tuple>

#include <fmt/format.h>

#include "sgp/compress/compressor.hpp"
#include "sgp/config/setting_types.hpp"
#include "sgp/simulate/peer_changes.hpp"
#include "sgp/simulate/simulate_run.hpp"
#include "sgp/transport/faulty_transport.hpp"

namespace sgp::simulate {

std::span<const NamedValue<SimulatedAlgorithm>> names(SimulatedAlgorithm) {
  static constexpr std::array<NamedValue<SimulatedAlgorithm>, 4> table = {{
      {SimulatedAlgorithm::sgp, "sgp", "synchronous push-sum, float32, PushSumEngine's rounds"},
      {SimulatedAlgorithm::asgp, "asgp", "asynchronous: running sums, message faults, double"},
      {SimulatedAlgorithm::gt, "gt", "sgp with gradient tracking"},
      {SimulatedAlgorithm::agt, "agt", "asgp with gradient tracking"},
  }};
  return table;
}

std::span<const NamedValue<Workload>> names(Workload) {
  static constexpr std::array<NamedValue<Workload>, 2> table = {{
      {Workload::consensus, "consensus", "no steps: average vectors with a known mean"},
      {Workload::quadratic, "quadratic", "decentralized SGD on per-peer least squares"},
  }};
  return table;
}

std::span<const NamedValue<MomentumKind>> names(MomentumKind) {
  static constexpr std::array<NamedValue<MomentumKind>, 2> table = {{
      {MomentumKind::local, "local", "m <- beta m + g, as the peers' SGD"},
      {MomentumKind::quasi_global, "quasi-global", "m follows the change of the mixed model"},
  }};
  return table;
}

int SimulateSettings::default_threads() {
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

namespace {

using config::detail::between;
using config::detail::Range;
using C = SimulateSettings;
using Rows = std::vector<std::unique_ptr<SimulateSetting>>;
constexpr auto kEvery = config::SettingScope::every_run;

constexpr std::string_view kTopology = "Topology";
constexpr std::string_view kMixing = "Mixing";
constexpr std::string_view kWorkload = "Workload";
constexpr std::string_view kRun = "Run";

template <class T, class... Rest>
SimulateSetting& add(Rows& rows, std::string_view key, std::string_view group,
                     std::string_view help, bool in_sweeps, T C::*field, Rest&&... rest) {
  rows.push_back(std::make_unique<config::detail::TypedSetting<T, C>>(
      key, group, help, kEvery, in_sweeps, field, std::forward<Rest>(rest)...));
  return *rows.back();
}

std::string check_mode(const std::string& mode) {
  if (mode.empty() || mode == "sync" || mode == "async") return {};
  return fmt::format("'{}' is not one of sync, async", mode);
}

std::string check_inject(const std::string& spec) {
  try {
    transport::parse_round_fault_spec(spec);
  } catch (const InputError& e) {
    return e.what();
  }
  return {};
}

// --drop P, --dup P, --delay R: the older flags (and sweep keys) of one part of --inject each,
// read by its parser.
class FaultAlias final : public SimulateSetting {
 public:
  FaultAlias(std::string_view key, std::string_view help)
      : SimulateSetting(key, kMixing, help, kEvery, true) {}
  std::string value_hint() const override { return key() == "delay" ? "INT" : "NUMBER"; }
  nlohmann::json get(const C& c) const override { return nlohmann::json::parse(text(c)); }
  std::string text(const C& c) const override {
    const auto spec = transport::parse_round_fault_spec(c.inject);
    if (key() == "drop") return fmt::format("{}", spec.drop);
    if (key() == "dup") return fmt::format("{}", spec.duplicate);
    return fmt::format("{}", spec.delay_rounds);
  }
  void set(C& c, const nlohmann::json& value) const override {
    if (!value.is_number())
      throw config::SettingError(fmt::format("expected a number, got {}", value.dump()));
    parse(c, value.dump());
  }
  void parse(C& c, std::string_view text) const override {
    transport::FaultSpec part;
    try {
      part = transport::parse_round_fault_spec(fmt::format("{}={}", key(), text));
    } catch (const InputError& e) {
      throw config::SettingError(e.what());
    }
    auto spec = transport::parse_round_fault_spec(c.inject);
    if (key() == "drop") spec.drop = part.drop;
    if (key() == "dup") spec.duplicate = part.duplicate;
    if (key() == "delay") spec.delay_rounds = part.delay_rounds;
    c.inject = transport::format_round_fault_spec(spec);
  }
  std::string problem(const C&) const override { return {}; }
};

std::string check_changes(const std::vector<std::string>& items) {
  for (const auto& item : items) {
    try {
      parse_peer_changes(item, PeerChange::Kind::fail, "");
    } catch (const InputError&) {
      return fmt::format("'{}': expected RANK@ROUND (e.g. 3@100: rank 3 at the start of round 100)",
                         item);
    }
  }
  return {};
}

void add_topology_rows(Rows& r) {
  add(r, "topology", kTopology,
      "a kind of `sgp topology generate` (ring, torus, exponential, one-peer-exponential, "
      "random-regular, ...) or a DOT file",
      false, &C::topology);
  add(r, "peers", kTopology, "N, for a kind (a file fixes N itself)", false, &C::peers,
      between(2, 65535));
  add(r, "self_weight", kTopology,
      "mixing rate a in (0, 1): keep a, spread 1 - a over the out-neighbours (0: uniform over "
      "out-degree + 1)",
      true, &C::self_weight, Range{0, 1, false, true});
  add(r, "degree", kTopology,
      "random-regular: out-degree (default ceil(log2 N)); hyper-hypercube, base: at most k "
      "neighbours per round (default 1); 0: the default",
      true, &C::degree, between(0, 1 << 20));
  add(r, "topology_seed", kTopology, "random-regular, one-peer-random-shift: graph seed", true,
      &C::topology_seed);
}

void add_mixing_rows(Rows& r) {
  add(r, "algo", kMixing,
      "sgp (synchronous push-sum, float32, PushSumEngine's rounds), asgp (asynchronous: running "
      "sums, message faults, double), gt or agt (the same with gradient tracking: a tracker y of "
      "the mean gradient mixed with x in one message)",
      true, &C::algo);
  add(r, "running_sums", kMixing,
      "async: running sums on the edges (--no-running-sums: plain push-sum, a lost message's "
      "mass is gone, to measure the bias)",
      true, &C::running_sums);
  add(r, "inject", kMixing,
      "async: message faults, seeded, as peers' --inject: drop=P (lost), dup=P (arrives twice), "
      "delay=R (each message 0..R rounds late, uniform), seed=S (mixed with --seed); any subset",
      true, &C::inject, Range{}, &check_inject);
  add(r, "compress", kMixing,
      "sgp, consensus: compressed gossip with public copies and error feedback, topk:R | randk:R "
      "(fraction R of the coordinates) | sign | qsgd:LEVELS",
      true, &C::compress);
  add(r, "consensus_step", kMixing,
      "with --compress: the consensus step gamma (default: R for topk/randk, 0.005 for sign, "
      "1 / (1 + omega) for qsgd)",
      true, &C::consensus_step, Range{0.0, 1.0, true, false});
}

void add_workload_rows(Rows& r) {
  add(r, "workload", kWorkload,
      "consensus (no steps: average vectors with a known mean) or quadratic (decentralized SGD "
      "on per-peer least squares with a known optimum)",
      true, &C::workload);
  add(r, "lr", kWorkload, "quadratic: step size", true, &C::lr, between(0.0, 1.0));
  add(r, "noise", kWorkload, "quadratic: gradient noise, standard deviation", true, &C::noise,
      between(0.0, 1e6));
  add(r, "spread", kWorkload, "quadratic: heterogeneity (how far apart the peers' optima lie)",
      true, &C::spread, between(0.0, 1e6));
  add(r, "momentum", kWorkload, "quadratic, sgp/asgp: momentum beta", true, &C::momentum,
      between(0.0, 0.999999));
  add(r, "momentum_kind", kWorkload,
      "local (m <- beta m + g, as the peers' SGD) or quasi-global (Lin et al.: m follows "
      "(z_before - z_after) / lr of the mixed model)",
      true, &C::momentum_kind);
  add(r, "global_average_every", kWorkload,
      "quadratic, sgp: every H-th round is an exact average of z instead of gossip (Gossip-PGA; "
      "0 = never)",
      true, &C::global_average_every, between(0, 1e9));
  add(r, "slow_momentum", kWorkload,
      "with --global-average-every: SlowMo's outer momentum beta_s at each exact average (0: "
      "the PGA average itself)",
      true, &C::slow_momentum, between(0.0, 0.999999));
}

void add_run_rows(Rows& r) {
  add(r, "dim", kRun, "D: values per peer", true, &C::dim, between(1, 1 << 28));
  add(r, "rounds", kRun, "gossip rounds", true, &C::rounds, between(1, 1e9));
  add(r, "seed", kRun, "initial vectors, shards, gradient noise and message faults", true,
      &C::seed);
  add(r, "threads", kRun, "threads that run the peers", true, &C::threads, between(1, 256));
  add(r, "log_every", kRun, "a simulate.jsonl record every this many rounds", true, &C::log_every,
      between(1, 1e9));
  add(r, "fail", kRun,
      "RANK@ROUND[,...]: the rank fails at the start of that round; its mass is gone, the "
      "survivors restart from z with w = 1 and mix over the repaired schedule (asgp's "
      "exclusion, noticed at once)",
      true, &C::fail, Range{}, &check_changes);
  add(r, "join", kRun,
      "RANK@ROUND[,...]: a failed rank rejoins; the first live rank after it gives it half of "
      "its mass (asgp's --join)",
      true, &C::join, Range{}, &check_changes);
  add(r, "predict", kRun,
      "the predicted sigma and rho (dense O(N^3); done up to 1024 peers; --no-predict: skip)", true,
      &C::predict);
  add(r, "run_dir", kRun, "run directory (default runs/simulate-<time>)", false, &C::run_dir);
  add(r, "overwrite", kRun, "delete sgp's results in --run-dir first", false, &C::overwrite);
  add(r, "log_level", kRun, "trace, debug, info, warn, error or off", false, &C::log_level);
}

const Rows& table() {
  static const Rows rows = [] {
    Rows out;
    for (auto add_rows : {add_topology_rows, add_mixing_rows, add_workload_rows, add_run_rows})
      add_rows(out);
    return out;
  }();
  return rows;
}

const Rows& alias_table() {
  static const Rows rows = [] {
    Rows out;
    add(out, "mode", kMixing, "the older name of --algo: sync = sgp, async = asgp", true, &C::mode,
        Range{}, &check_mode);
    out.push_back(std::make_unique<FaultAlias>("drop", "the same as --inject drop=P"));
    out.push_back(std::make_unique<FaultAlias>("dup", "the same as --inject dup=P"));
    out.push_back(std::make_unique<FaultAlias>("delay", "the same as --inject delay=R"));
    return out;
  }();
  return rows;
}

std::vector<const SimulateSetting*> pointers(const Rows& rows) {
  std::vector<const SimulateSetting*> out;
  for (const auto& row : rows) out.push_back(row.get());
  return out;
}

}  // namespace

std::span<const SimulateSetting* const> simulate_settings() {
  static const auto rows = pointers(table());
  return rows;
}

std::span<const SimulateSetting* const> simulate_setting_aliases() {
  static const auto rows = pointers(alias_table());
  return rows;
}

const SimulateSetting* find_simulate_setting(std::string_view key) {
  for (auto rows : {simulate_settings(), simulate_setting_aliases()}) {
    for (const SimulateSetting* s : rows)
      if (s->key() == key) return s;
  }
  return nullptr;
}

namespace {

bool asynchronous(SimulatedAlgorithm a) {
  return a == SimulatedAlgorithm::asgp || a == SimulatedAlgorithm::agt;
}

// --algo, or the older --mode sync|async (sgp|asgp); both only if they agree.
SimulatedAlgorithm algorithm_of(const SimulateSettings& s, const GivenKeys& given) {
  if (!given.contains("mode")) return s.algo;
  if (given.contains("algo") && (s.mode == "async") != asynchronous(s.algo)) {
    throw InputError(fmt::format(
        "sgp simulate: --mode {} contradicts --algo {} (sgp and gt are synchronous, asgp and agt "
        "asynchronous; --mode is the older name: give --algo alone)",
        s.mode, name_of(s.algo)));
  }
  return given.contains("algo") ? s.algo
         : s.mode == "async"    ? SimulatedAlgorithm::asgp
                                : SimulatedAlgorithm::sgp;
}

// Options that only one kind of run has.
void check_combinations(const SimulationOptions& o, const GivenKeys& given) {
  for (const char* key : {"inject", "drop", "dup", "delay", "running_sums"}) {
    if (o.mode == Mixing::sync && given.contains(key)) {
      throw InputError(fmt::format(
          "sgp simulate: {} needs an asynchronous algorithm, --algo asgp or agt (--mode async): "
          "synchronous push-sum, as sgp, loses no message",
          find_simulate_setting(key)->flag()));
    }
  }
  for (const char* key : {"lr", "noise", "spread"}) {
    if (o.workload == Workload::consensus && given.contains(key)) {
      throw InputError(
          fmt::format("sgp simulate: {} is for --workload quadratic (consensus has no steps)",
                      find_simulate_setting(key)->flag()));
    }
  }
}

std::vector<PeerChange> peer_changes(const SimulateSettings& s) {
  std::vector<PeerChange> out;
  for (const auto& [items, kind, flag] : {std::tuple(&s.fail, PeerChange::Kind::fail, "--fail"),
                                          std::tuple(&s.join, PeerChange::Kind::join, "--join")}) {
    for (const auto& item : *items) {
      const auto changes = parse_peer_changes(item, kind, flag);
      out.insert(out.end(), changes.begin(), changes.end());
    }
  }
  return out;
}

OptimizerOptions optimizer_options(const SimulateSettings& s, SimulatedAlgorithm algo) {
  OptimizerOptions p;
  p.gradient_tracking = algo == SimulatedAlgorithm::gt || algo == SimulatedAlgorithm::agt;
  p.momentum = s.momentum;
  p.momentum_kind = s.momentum_kind;
  p.global_average_every = s.global_average_every;
  p.slow_momentum = s.slow_momentum;
  return p;
}

}  // namespace

SimulateCommand simulate_command(const SimulateSettings& s, const GivenKeys& given) {
  SimulateCommand c{s, {}};
  auto& o = c.options;
  const SimulatedAlgorithm algo = algorithm_of(s, given);
  c.settings.algo = algo;
  o.dim = static_cast<std::size_t>(s.dim);
  o.rounds = s.rounds;
  o.mode = asynchronous(algo) ? Mixing::async : Mixing::sync;
  o.running_sums = s.running_sums;
  const auto faults = transport::parse_round_fault_spec(s.inject);
  o.faults = {faults.drop, faults.duplicate, faults.delay_rounds, s.seed ^ faults.seed};
  o.workload = s.workload;
  o.lr = s.lr;
  o.noise = s.noise;
  o.spread = s.spread;
  o.optimizer = optimizer_options(s, algo);
  o.seed = s.seed;
  o.threads = s.threads;
  o.log_every = s.log_every;
  o.changes = peer_changes(s);
  if (s.compress) o.compressor = compress::parse_compressor(*s.compress, "--compress");
  o.consensus_step = s.consensus_step.value_or(0.0);
  check_combinations(o, given);
  require_valid_optimizer(o);
  return c;
}

nlohmann::json settings_json(const SimulateSettings& settings) {
  nlohmann::json out = nlohmann::json::object();
  for (const SimulateSetting* s : simulate_settings())
    out[std::string(s->key())] = s->get(settings);
  return out;
}

}  // namespace sgp::simulate
