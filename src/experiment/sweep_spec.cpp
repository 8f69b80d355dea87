#include "sgp/experiment/sweep_spec.hpp"

#include <algorithm>
#include <array>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sgp/config/settings.hpp"
#include "sgp/error.hpp"
#include "sgp/named_values.hpp"
#include "sgp/topology/dot_file.hpp"
#include "sgp/topology/generator.hpp"
#include "simulate_sweep.hpp"
#include "toml_reader.hpp"

namespace sgp::experiment {

namespace {

using config::Setting;
using config::TrainConfig;
using nlohmann::json;

constexpr int kMaxPeers = 4096;
// A grid larger than this is a mistake (10,000 one-epoch runs take weeks), and expanding it
// would take the time and memory of its size before saying anything.
constexpr std::uint64_t kMaxPoints = 10000;
// Grid axes named in the point name's fixed part, in expansion order after algo.
constexpr std::array<std::string_view, 4> kNamedAxes = {"algo", "self_weight", "gossip_every",
                                                        "seed"};

struct Tables {
  const toml::table* grid = nullptr;
  const toml::table* train = nullptr;
  const toml::table* quick = nullptr;
  const toml::table* simulate = nullptr;  // command = "simulate": its fixed options
};

struct TopologyEntry {
  std::string value;  // kind name or resolved path
  bool is_file = false;
  const toml::node* node = nullptr;
  std::vector<int> peers;  // its own N values (a file: the file's N); empty: grid.peers
  int degree = 0;          // --degree of base, hyper-hypercube, random-regular; 0: the default
};

// A grid axis over one setting: its values as JSON, in the file's order.
struct Axis {
  const Setting* setting = nullptr;
  std::vector<json> values;
};

struct Grid {
  std::vector<TopologyEntry> topologies;
  std::vector<int> peers = {8};
  std::map<std::string, std::vector<TopologyEntry>> topology_for_algo;
  std::vector<Axis> axes;  // in expansion order (see kNamedAxes)
};

bool is_topology_kind(const std::string& name) {
  for (auto kind : topology::all_topology_kinds())
    if (topology::topology_kind_name(kind) == name) return true;
  return false;
}

std::string sweep_keys() {
  std::vector<std::string_view> keys;
  for (const Setting* s : config::training_settings())
    if (s->in_sweeps()) keys.push_back(s->key());
  return fmt::format("{}", fmt::join(keys, ", "));
}

// The setting named by a [train], [quick] or [grid] key; fails naming the key otherwise.
const Setting& sweep_setting(const TomlReader& r, const toml::key& key, const std::string& full) {
  const Setting* s = config::find_setting(key.str());
  if (s && !s->in_sweeps()) {
    r.fail(key.source(), full, "set by `sgp sweep` itself for each point; it cannot be set here");
  }
  if (!s) r.fail(key.source(), full, fmt::format("unknown key (valid: {})", sweep_keys()));
  return *s;
}

void set_setting(TrainConfig& c, const Setting& s, const TomlReader& r, const toml::node& n,
                 const std::string& key) {
  try {
    s.set(c, r.to_json(n, key));
  } catch (const config::SettingError& e) {
    if (const auto* items = n.as_array()) {  // point at the item that is wrong
      for (const auto& item : *items) {
        TrainConfig probe;
        try {
          s.set(probe, json::array({r.to_json(item, key)}));
        } catch (const config::SettingError& item_error) {
          r.fail(item, key, item_error.what());
        }
      }
    }
    r.fail(n, key, e.what());
  }
}

void check_name(const TomlReader& r, const toml::node& node, const std::string& name) {
  const bool safe =
      !name.empty() && name != "." && name != ".." &&
      std::all_of(name.begin(), name.end(), [](char ch) {
        return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.';
      });
  if (!safe) {
    r.fail(node, "name",
           fmt::format("'{}' must be non-empty and use only letters, digits, '-', '_' and '.' "
                       "(it names the results directory)",
                       name));
  }
}

Tables read_top_level(const toml::table& doc, SweepSpec& spec, const TomlReader& r) {
  Tables t;
  for (const auto& [key, node] : doc) {
    const std::string name(key.str());
    if (name == "name") {
      spec.name = r.string(node, name);
      check_name(r, node, spec.name);
    } else if (name == "description") {
      spec.description = r.string(node, name);
    } else if (name == "command") {
      spec.command = r.string(node, name);
      if (spec.command != "launch" && spec.command != "simulate") {
        r.fail(node, name, "expected \"launch\" (the default) or \"simulate\"");
      }
    } else if (name == "simulate") {
      t.simulate = &r.table(node, name);
    } else if (name == "grid" || name == "train" || name == "quick") {
      const toml::table* table = &r.table(node, name);
      (name == "grid" ? t.grid : name == "train" ? t.train : t.quick) = table;
    } else {
      r.fail(key.source(), name,
             "unknown key (valid: name, description, command, grid, train, simulate, quick)");
    }
  }
  if (spec.name.empty()) r.fail("name", "missing (the sweep's name, e.g. name = \"my-sweep\")");
  if (!t.grid) {
    r.fail("grid",
           "missing (a [grid] table with at least one list, e.g. topology = [\"ring\", "
           "\"complete\"])");
  }
  return t;
}

void apply_settings(TrainConfig& c, const TomlReader& r, const toml::table& table,
                    const std::string& section) {
  for (const auto& [key, node] : table) {
    const std::string full = section + "." + std::string(key.str());
    set_setting(c, sweep_setting(r, key, full), r, node, full);
  }
}

// [train], then [quick] over it with --quick; [quick] is checked either way, so that a mistake
// in it shows up in a dry run too.
TrainConfig read_settings(const Tables& t, const TomlReader& r, bool quick) {
  TrainConfig base;
  if (t.train) apply_settings(base, r, *t.train, "train");
  if (t.quick) {
    TrainConfig quick_config = base;
    apply_settings(quick_config, r, *t.quick, "quick");
    if (quick) base = quick_config;
  }
  return base;
}

std::vector<int> read_peers(const TomlReader& r, const toml::node& node, const std::string& key) {
  std::vector<int> peers;
  r.list(node, key, [&](const toml::node& item) {
    peers.push_back(static_cast<int>(r.integer_in(item, key, 2, kMaxPeers)));
  });
  return peers;
}

// A DOT file fixes N: read it now, so that the point's name and summary.csv carry its real N
// and a broken file is refused before anything runs.
int file_peers(const TomlReader& r, const toml::node& item, const std::string& key,
               const std::filesystem::path& path) {
  try {
    return topology::read_dot_file(path).num_peers();
  } catch (const InputError& e) {
    r.fail(item, key, e.what());
  }
}

TopologyEntry read_topology_name(const TomlReader& r, const toml::node& item,
                                 const std::string& key, const std::filesystem::path& source) {
  TopologyEntry entry{r.string(item, key), false, &item, {}};
  if (is_topology_kind(entry.value)) return entry;
  std::filesystem::path path(entry.value);
  if (path.is_relative()) path = source.parent_path() / path;
  if (!std::filesystem::is_regular_file(path)) {
    std::vector<std::string_view> kinds;
    for (auto kind : topology::all_topology_kinds())
      kinds.push_back(topology::topology_kind_name(kind));
    r.fail(item, key,
           fmt::format("'{}' is neither a topology kind ({}) nor an existing DOT file", entry.value,
                       fmt::join(kinds, ", ")));
  }
  entry.value = path.string();
  entry.is_file = true;
  entry.peers = {file_peers(r, item, key, path)};
  return entry;
}

// A kind or file name, or a table {kind = "ring", peers = 6} pairing a kind with its own N
// (one value or a list), which then replaces grid.peers for it.
TopologyEntry read_topology(const TomlReader& r, const toml::node& item, const std::string& key,
                            const std::filesystem::path& source) {
  if (!item.is_table()) return read_topology_name(r, item, key, source);
  const toml::table& table = *item.as_table();
  const toml::node* kind = table.get("kind");
  if (!kind)
    r.fail(item, key, "a table needs kind = \"<kind or DOT file>\" (and optional peers, degree)");
  TopologyEntry entry = read_topology_name(r, *kind, key + ".kind", source);
  entry.node = &item;
  for (const auto& [name, node] : table) {
    if (name.str() == "kind") continue;
    if (name.str() == "degree" && !entry.is_file) {
      entry.degree = static_cast<int>(r.integer_in(node, key + ".degree", 1, 1 << 20));
      continue;
    }
    if (name.str() != "peers")
      r.fail(name.source(), key + "." + std::string(name.str()),
             "unknown key (valid: kind, peers, and degree for a kind)");
    const auto peers = read_peers(r, node, key + ".peers");
    if (entry.is_file && peers != entry.peers) {
      r.fail(node, key + ".peers",
             fmt::format("{} has {} peers: a DOT file fixes N itself", entry.value,
                         entry.peers.front()));
    }
    entry.peers = peers;
  }
  return entry;
}

// A single value or table, or a list of them.
void read_topologies(const TomlReader& r, const toml::node& node, const std::string& key,
                     const std::filesystem::path& source, std::vector<TopologyEntry>& out) {
  if (node.is_table()) {
    out.push_back(read_topology(r, node, key, source));
    return;
  }
  r.list(node, key,
         [&](const toml::node& item) { out.push_back(read_topology(r, item, key, source)); });
}

Axis read_axis(const TomlReader& r, const toml::key& key, const toml::node& node) {
  const std::string full = "grid." + std::string(key.str());
  Axis axis{&sweep_setting(r, key, full), {}};
  r.list(node, full, [&](const toml::node& item) {
    TrainConfig probe;
    set_setting(probe, *axis.setting, r, item, full);  // checks the value
    axis.values.push_back(axis.setting->get(probe));
  });
  return axis;
}

void read_topology_for_algo(Grid& g, const TomlReader& r, const toml::node& node,
                            const std::filesystem::path& source) {
  for (const auto& [algo_key, list] : r.table(node, "grid.topology_for_algo")) {
    const std::string algo(algo_key.str());
    const std::string key = "grid.topology_for_algo." + algo;
    if (auto problem = unknown_name_problem<config::Algorithm>(algo); !problem.empty()) {
      r.fail(algo_key.source(), key, problem);
    }
    read_topologies(r, list, key, source, g.topology_for_algo[algo]);
  }
}

// Axes in expansion order: algo, self_weight, gossip_every, seed, then the others as written.
void sort_axes(std::vector<Axis>& axes) {
  auto rank = [](const Axis& a) {
    const auto it = std::find(kNamedAxes.begin(), kNamedAxes.end(), a.setting->key());
    return it - kNamedAxes.begin();
  };
  std::stable_sort(axes.begin(), axes.end(),
                   [&](const Axis& a, const Axis& b) { return rank(a) < rank(b); });
}

Grid read_grid(const toml::table& table, const TomlReader& r, const std::filesystem::path& source) {
  Grid g;
  if (table.empty()) {
    r.fail("grid", "empty (give at least one list, e.g. topology = [\"ring\", \"complete\"])");
  }
  for (const auto& [key, node] : table) {
    const std::string name(key.str());
    if (name == "topology") {
      read_topologies(r, node, "grid.topology", source, g.topologies);
    } else if (name == "peers") {
      g.peers = read_peers(r, node, "grid.peers");
    } else if (name == "topology_for_algo") {
      read_topology_for_algo(g, r, node, source);
    } else {
      g.axes.push_back(read_axis(r, key, node));
    }
  }
  if (g.topologies.empty()) g.topologies.push_back({"one-peer-exponential", false, nullptr, {}});
  sort_axes(g.axes);
  return g;
}

// The algorithms of the grid (or the [train] one) with the topologies each runs on.
std::vector<std::pair<json, const std::vector<TopologyEntry>*>> algo_plan(
    const Grid& g, const TrainConfig& base, const TomlReader& r, const toml::table& grid_table) {
  std::vector<json> algos = {config::find_setting("algo")->get(base)};
  for (const auto& axis : g.axes)
    if (axis.setting->key() == "algo") algos = axis.values;
  std::vector<std::pair<json, const std::vector<TopologyEntry>*>> plan;
  for (const auto& algo : algos) {
    const auto over = g.topology_for_algo.find(algo.get<std::string>());
    plan.emplace_back(algo, over != g.topology_for_algo.end() ? &over->second : &g.topologies);
  }
  for (const auto& [algo, entries] : g.topology_for_algo) {
    if (std::find(algos.begin(), algos.end(), json(algo)) == algos.end()) {
      r.fail(*grid_table.get("topology_for_algo"), "grid.topology_for_algo." + algo,
             fmt::format("'{}' is not in grid.algo", algo));
    }
  }
  return plan;
}

// Catches kinds that do not fit N (a prime torus, a hypercube of 6) before anything runs.
void check_fits(const TopologyEntry& topo, int n, const TomlReader& r) {
  if (topo.is_file) return;
  try {
    topology::GeneratorOptions options;
    options.num_peers = n;
    options.degree = topo.degree;
    topology::check_topology_fits(topology::parse_topology_kind(topo.value), options);
  } catch (const InputError& e) {
    const std::string what = fmt::format("{} with {} peers: {}", topo.value, n, e.what());
    if (topo.node) r.fail(*topo.node, "grid.topology", what);
    r.fail("grid.topology", what);
  }
}

// algo: set by the caller; self_weight: one point, the topology's own weights; compress: one
// point, float32
bool axis_ignored(const Setting& s, const config::AlgorithmInfo& algo) {
  return s.key() == "algo" || (s.key() == "self_weight" && !algo.uses_self_weight) ||
         (s.key() == "compress" && !algo.compressible);
}

// The number of points combine() makes for one algorithm, topology and N, counted before they
// are made (saturating: a few short lists can multiply to billions).
std::uint64_t points_per_start(const std::vector<Axis>& axes, const config::AlgorithmInfo& algo) {
  std::uint64_t count = 1;
  for (const auto& axis : axes)
    if (!axis_ignored(*axis.setting, algo))
      count = std::min<std::uint64_t>(count * axis.values.size(), kMaxPoints + 1);
  return count;
}

// Every combination of the axes after `first` (algo is expanded by the caller), in order.
void combine(const std::vector<Axis>& axes, std::size_t i, SweepPoint point,
             std::vector<SweepPoint>& out) {
  if (i == axes.size()) {
    out.push_back(std::move(point));
    return;
  }
  const Setting& s = *axes[i].setting;
  if (axis_ignored(s, info(point.config.algo))) {
    combine(axes, i + 1, std::move(point), out);
    return;
  }
  for (const auto& value : axes[i].values) {
    SweepPoint p = point;
    s.set(p.config, value);
    combine(axes, i + 1, std::move(p), out);
  }
}

std::vector<std::string> other_axes(const std::vector<Axis>& axes) {
  std::vector<std::string> keys;
  for (const auto& axis : axes) {
    const auto key = axis.setting->key();
    if (std::find(kNamedAxes.begin(), kNamedAxes.end(), key) == kNamedAxes.end()) {
      keys.emplace_back(key);
    }
  }
  return keys;
}

std::vector<SweepPoint> expand(const Grid& g, const TrainConfig& base, const TomlReader& r,
                               const toml::table& grid_table) {
  std::vector<SweepPoint> points;
  std::uint64_t planned = 0;
  const Setting& algo_setting = *config::find_setting("algo");
  for (const auto& [algo, topologies] : algo_plan(g, base, r, grid_table)) {
    for (const auto& topo : *topologies) {
      for (int n : topo.peers.empty() ? g.peers : topo.peers) {
        check_fits(topo, n, r);
        SweepPoint p{topo.value, topo.is_file, n, base, other_axes(g.axes), {}, topo.degree};
        algo_setting.set(p.config, algo);
        planned += points_per_start(g.axes, info(p.config.algo));
        if (planned > kMaxPoints)
          r.fail("grid", fmt::format("more than {} points: split the sweep into several files",
                                     kMaxPoints));
        if (!info(p.config.algo).uses_self_weight) p.config.self_weight = 0.0;
        if (!info(p.config.algo).compressible) p.config.compress = gossip::Compression::none;
        combine(g.axes, 0, std::move(p), points);
      }
    }
  }
  std::set<std::string> names;
  for (const auto& p : points) {
    if (!names.insert(p.name()).second) {
      r.fail("grid", fmt::format("two points are both named {} (is a value listed twice, or do "
                                 "two topology files share a name?)",
                                 p.name()));
    }
  }
  return points;
}

std::string format_weight(double a) { return a == 0.0 ? "uniform" : fmt::format("{}", a); }

// A setting's value as part of a directory name.
std::string name_part(std::string text) {
  for (char& ch : text) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '-') ch = '-';
  }
  return text;
}

}  // namespace

std::string SweepPoint::topology_label() const {
  if (topology_is_file) return std::filesystem::path(topology).stem().string();
  return topology_degree == 0 ? topology : fmt::format("{}-k{}", topology, topology_degree);
}

std::string SweepPoint::name() const {
  if (!simulate.is_null()) return simulate_point_name(*this);
  std::string out = fmt::format("{}_n{}_a{}_{}_h{}_s{}", topology_label(), peers,
                                format_weight(config.self_weight), name_of(config.algo),
                                config.gossip_every, config.seed);
  for (const auto& key : other_axes) {
    out += fmt::format("_{}-{}", key, name_part(config::find_setting(key)->text(config)));
  }
  return out;
}

SweepSpec parse_sweep_spec(std::string_view text, const std::filesystem::path& source, bool quick) {
  const TomlReader r(source.string());
  toml::table doc;
  try {
    doc = toml::parse(text, source.string());
  } catch (const toml::parse_error& e) {
    r.fail(e.source(), "TOML syntax", std::string(e.description()));
  }
  SweepSpec spec;
  spec.source = source;
  const Tables tables = read_top_level(doc, spec, r);
  if (spec.command == "simulate") {
    if (tables.train)
      r.fail("train", "is for sgp launch; a simulate sweep's fixed options go in [simulate]");
    spec.points =
        expand_simulate_sweep(*tables.grid, tables.simulate, tables.quick, quick, r, source);
    return spec;
  }
  if (tables.simulate)
    r.fail("simulate", "needs command = \"simulate\" (this sweep runs sgp launch)");
  const TrainConfig base = read_settings(tables, r, quick);
  const Grid grid = read_grid(*tables.grid, r, source);
  spec.points = expand(grid, base, r, *tables.grid);
  return spec;
}

SweepSpec read_sweep_file(const std::filesystem::path& path, bool quick) {
  std::ifstream in(path);
  if (!in) throw InputError(fmt::format("{}: cannot read the sweep file", path.string()));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_sweep_spec(text.str(), path, quick);
}

}  // namespace sgp::experiment
