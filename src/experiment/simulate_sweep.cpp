#include "simulate_sweep.hpp"

#include <algorithm>
#include <array>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "sgp/error.hpp"
#include "sgp/launch/local_processes.hpp"
#include "sgp/run/file_names.hpp"
#include "sgp/run/run_directory.hpp"
#include "sgp/simulate/peer_changes.hpp"
#include "sgp/simulate/simulate_run.hpp"
#include "sgp/simulate/simulate_settings.hpp"
#include "sgp/topology/analysis.hpp"
#include "sgp/topology/generator.hpp"

namespace sgp::experiment {

namespace {

using nlohmann::json;

using simulate::SimulateSetting;
using simulate::SimulateSettings;

// The keys a simulate sweep may set: topology and peers (grid only), and every option of sgp
// simulate's settings table that sweeps may set (simulate/simulate_settings.hpp).
std::string valid_keys() {
  std::vector<std::string_view> names = {"topology", "peers"};
  for (auto rows : {simulate::simulate_settings(), simulate::simulate_setting_aliases()}) {
    for (const SimulateSetting* s : rows)
      if (s->in_sweeps()) names.push_back(s->key());
  }
  return fmt::format("{}", fmt::join(names, ", "));
}

const SimulateSetting& simulate_key(const TomlReader& r, const toml::key& key,
                                    const std::string& full) {
  const SimulateSetting* s = simulate::find_simulate_setting(key.str());
  if (!s || !s->in_sweeps()) {
    r.fail(key.source(), full,
           fmt::format("unknown key for sgp simulate (valid: {})", valid_keys()));
  }
  return *s;
}

// The value as the file gives it, checked by its row as the flag would be.
json read_value(const TomlReader& r, const toml::node& n, const std::string& full,
                const SimulateSetting& s) {
  json value = r.to_json(n, full);
  try {
    SimulateSettings probe;
    s.set(probe, value);
  } catch (const config::SettingError& e) {
    r.fail(n, full, e.what());
  }
  return value;
}

// The settings of a point (topology, peers and every key set), and which keys were set.
std::pair<SimulateSettings, simulate::GivenKeys> settings_of(const json& point) {
  SimulateSettings settings;
  simulate::GivenKeys given;
  for (const auto& [key, value] : point.items()) {
    simulate::find_simulate_setting(key)->set(settings, value);
    given.insert(key);
  }
  return {settings, given};
}

void apply_fixed(json& settings, const TomlReader& r, const toml::table& table,
                 const std::string& section) {
  for (const auto& [key, node] : table) {
    const std::string full = section + "." + std::string(key.str());
    settings[std::string(key.str())] = read_value(r, node, full, simulate_key(r, key, full));
  }
}

struct GridAxis {
  std::string key;
  std::vector<json> values;
};

struct TopologyValue {
  std::string value;  // a kind, or a DOT file resolved against the sweep file
  const toml::node* node;
  int degree = 0;  // from {kind = "base", degree = 2}: that point's --degree; 0: none
};

// A grid.topology item: a kind or DOT file name, or {kind = "<kind>", degree = k}.
TopologyValue read_topology_value(const TomlReader& r, const toml::node& item,
                                  const std::filesystem::path& source) {
  const std::string full = "grid.topology";
  if (const toml::table* table = item.as_table()) {
    const toml::node* kind = table->get("kind");
    const toml::node* degree = table->get("degree");
    if (!kind || !degree || table->size() != 2)
      r.fail(item, full, "a table must be {kind = \"<kind>\", degree = <k>}");
    const auto k =
        read_value(r, *degree, full + ".degree", *simulate::find_simulate_setting("degree"));
    return {r.string(*kind, full + ".kind"), &item, k.get<int>()};
  }
  std::filesystem::path path(r.string(item, full));
  // A kind stays a name; anything else is a file next to the sweep file (sgp simulate says what
  // is wrong with either).
  if (path.is_relative() && std::filesystem::exists(source.parent_path() / path)) {
    path = source.parent_path() / path;
  }
  return {path.string(), &item};
}

struct SimulateGrid {
  std::vector<TopologyValue> topologies;
  std::vector<json> peers = {8};
  std::vector<GridAxis> axes;  // the file's order
};

SimulateGrid read_simulate_grid(const toml::table& table, const TomlReader& r,
                                const std::filesystem::path& source) {
  SimulateGrid g;
  if (table.empty()) r.fail("grid", "empty (give at least one list, e.g. peers = [64, 256])");
  for (const auto& [key, node] : table) {
    const std::string name(key.str()), full = "grid." + name;
    if (name == "topology") {
      r.list(node, full, [&](const toml::node& item) {
        g.topologies.push_back(read_topology_value(r, item, source));
      });
    } else if (name == "peers") {
      g.peers.clear();
      const SimulateSetting& peers = *simulate::find_simulate_setting("peers");
      r.list(node, full,
             [&](const toml::node& item) { g.peers.push_back(read_value(r, item, full, peers)); });
    } else {
      GridAxis axis{name, {}};
      const SimulateSetting& k = simulate_key(r, key, full);
      r.list(node, full,
             [&](const toml::node& item) { axis.values.push_back(read_value(r, item, full, k)); });
      g.axes.push_back(std::move(axis));
    }
  }
  if (g.topologies.empty()) g.topologies.push_back({"one-peer-exponential", nullptr});
  return g;
}

void combine(const std::vector<GridAxis>& axes, std::size_t i, json settings,
             std::vector<json>& out) {
  if (i == axes.size()) {
    out.push_back(std::move(settings));
    return;
  }
  for (const auto& value : axes[i].values) {
    settings[axes[i].key] = value;
    combine(axes, i + 1, settings, out);
  }
}

simulate::SimulateCommand command_of(const json& point) {
  const auto [settings, given] = settings_of(point);
  return simulate::simulate_command(settings, given);
}

// The schedule sgp simulate will build for the point; InputError for what it would refuse.
topology::Schedule checked_schedule(const json& s) {
  const auto command = command_of(s);
  auto schedule = simulate::simulation_schedule(command);
  simulate::require_valid_optimizer(command.options);
  simulate::require_fits_in_memory(schedule, command.options);
  simulate::plan_membership(schedule, command.options.changes, command.options.rounds);
  return schedule;
}

std::string value_text(const json& v) {
  std::string text = v.is_string() ? v.get<std::string>() : v.dump();
  for (char& ch : text)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '-') ch = '-';
  return text;
}

std::vector<std::string> simulate_arguments(const SweepPoint& p, const std::filesystem::path& dir) {
  const auto [settings, given] = settings_of(p.simulate);
  std::vector<std::string> args = {"simulate"};
  for (const auto& key : given) {
    config::append_setting_arguments(args, *simulate::find_simulate_setting(key), settings);
  }
  args.insert(args.end(), {"--run-dir", dir.string()});
  return args;
}

// The columns of summary.json a simulate sweep's summary.csv shows.
const std::array<std::string_view, 13> kSummaryColumns = {"final_live",
                                                          "final_sum_of_weights",
                                                          "final_consensus_error",
                                                          "final_mean_error",
                                                          "final_optimum_error",
                                                          "final_optimality_gap",
                                                          "predicted_consensus_rate",
                                                          "measured_contraction_per_period",
                                                          "wall_time_s",
                                                          "seconds_per_round",
                                                          "peak_rss_bytes",
                                                          "state_bytes",
                                                          "diverged_at_round"};

std::string cell(const json& summary, std::string_view key) {
  const auto it = summary.find(key);
  if (it == summary.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

}  // namespace

std::vector<SweepPoint> expand_simulate_sweep(const toml::table& grid_table,
                                              const toml::table* fixed,
                                              const toml::table* quick_table, bool quick,
                                              const TomlReader& r,
                                              const std::filesystem::path& source) {
  json base = json::object();
  if (fixed) apply_fixed(base, r, *fixed, "simulate");
  if (quick_table) {
    json over = base;
    apply_fixed(over, r, *quick_table, "quick");
    if (quick) base = over;
  }
  const SimulateGrid g = read_simulate_grid(grid_table, r, source);
  std::vector<std::string> axes;
  for (const auto& a : g.axes) axes.push_back(a.key);
  std::vector<SweepPoint> points;
  std::set<std::string> names;
  for (const auto& topo : g.topologies) {
    for (const auto& n : g.peers) {
      json settings = base;
      settings["topology"] = topo.value;
      settings["peers"] = n;
      if (topo.degree != 0) settings["degree"] = topo.degree;
      std::vector<json> combos;
      combine(g.axes, 0, settings, combos);
      for (auto& s : combos) {
        SweepPoint p;
        p.topology = topo.value;
        p.topology_degree = topo.degree;
        p.other_axes = axes;
        try {
          const auto schedule = checked_schedule(s);
          s["peers"] = schedule.num_peers();  // a DOT file's own N
          const auto kinds = topology::all_topology_kinds();
          p.topology_is_file = std::none_of(kinds.begin(), kinds.end(), [&](auto kind) {
            return topology::topology_kind_name(kind) == topo.value;
          });
          p.peers = schedule.num_peers();
          p.simulate = s;
        } catch (const InputError& e) {
          const std::string what =
              fmt::format("{} with {} peers: {}", topo.value, n.dump(), e.what());
          if (topo.node) r.fail(*topo.node, "grid.topology", what);
          r.fail("grid", what);
        }
        if (!names.insert(p.name()).second) {
          r.fail("grid", fmt::format("two points are both named {} (is a value listed twice, or "
                                     "do two topology files share a name, or a file its N?)",
                                     p.name()));
        }
        points.push_back(std::move(p));
      }
    }
  }
  return points;
}

std::string simulate_point_name(const SweepPoint& p) {
  std::string out = fmt::format("{}_n{}", p.topology_label(), p.peers);
  for (const auto& key : p.other_axes)
    out += fmt::format("_{}-{}", key, value_text(p.simulate[key]));
  return out;
}

PlannedPoint plan_simulate_point(const SweepPoint& p, const std::filesystem::path& root) {
  PlannedPoint plan;
  plan.point = &p;
  plan.dir = root / p.name();
  plan.peers = p.peers;
  try {
    plan.schedule = checked_schedule(p.simulate);
    plan.period = plan.schedule->period();
    plan.mixing_self_weight = plan.schedule->self_weight(0, 0);
    // Dense O(N^3): the run's summary.json has it for up to kMaxSpectralPeers peers.
    if (p.peers <= 256) {
      plan.rate = topology::analyze_topology(*plan.schedule, 1).consensus_rate;
    }
  } catch (const InputError& e) {
    plan.schedule.reset();
    plan.problem = e.what();
  }
  return plan;
}

std::optional<std::string> run_simulate_point(PlannedPoint& plan, int index,
                                              const std::string& prefix) {
  const auto log = plan.dir / "simulate.log";
  launch::LocalProcesses process({{index, simulate_arguments(*plan.point, plan.dir), log}});
  const auto failure = process.wait();
  if (process.interrupted()) {
    throw IoError(
        fmt::format("interrupted by signal {} during {}; run the same command again "
                    "to resume (finished points are kept)",
                    process.interrupted(), plan.point->name()));
  }
  if (failure) return fmt::format("sgp simulate failed: {}", failure->describe());
  const auto summary = run::read_json_file(plan.dir / run::kSummaryFile);
  if (!summary) return "sgp simulate wrote no summary.json";
  spdlog::info("{}: done: consensus error {}, {} live, {} s", prefix,
               cell(*summary, "final_consensus_error"), cell(*summary, "final_live"),
               cell(*summary, "wall_time_s"));
  return std::nullopt;
}

void write_simulate_summary_csv(const std::filesystem::path& file,
                                const std::vector<PlannedPoint>& plans) {
  const auto axes = plans.empty() ? std::vector<std::string>{} : plans.front().point->other_axes;
  std::vector<std::string> header = {"point", "topology", "peers"};
  header.insert(header.end(), axes.begin(), axes.end());
  header.insert(header.end(), {"status", "mixing_self_weight", "topology_period"});
  header.insert(header.end(), kSummaryColumns.begin(), kSummaryColumns.end());
  header.insert(header.end(), {"messages_lost", "run_dir"});
  std::vector<std::vector<std::string>> rows = {header};
  for (const auto& plan : plans) {
    const SweepPoint& p = *plan.point;
    json summary = json::object();
    if (plan.status == "finished") {
      if (auto j = run::read_json_file(plan.dir / run::kSummaryFile)) summary = *j;
    }
    std::vector<std::string> row = {p.name(), p.topology, std::to_string(plan.peers)};
    for (const auto& key : axes) row.push_back(cell(p.simulate, key));
    row.insert(
        row.end(),
        {plan.status, plan.mixing_self_weight ? fmt::format("{}", *plan.mixing_self_weight) : "",
         plan.period > 0 ? std::to_string(plan.period) : ""});
    for (const auto key : kSummaryColumns) {
      std::string value = cell(summary, key);
      if (value.empty() && key == "predicted_consensus_rate" && plan.rate) {
        value = fmt::format("{}", *plan.rate);  // not run yet: the plan's prediction
      }
      row.push_back(value);
    }
    row.push_back(summary.contains("messages") ? cell(summary["messages"], "lost") : "");
    row.push_back(plan.dir.filename().string());
    rows.push_back(std::move(row));
  }
  run::write_file_atomically(file, csv_text(rows));
}

}  // namespace sgp::experiment
