#include "sgp/peer/sweep_spec.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <toml++/toml.h>

#include "sgp/data/partition.hpp"
#include "sgp/error.hpp"
#include "sgp/model/model_spec.hpp"
#include "sgp/topology/generator.hpp"

namespace sgp::peer {

namespace {

constexpr double kNoMax = std::numeric_limits<double>::infinity();
const std::vector<std::string> kAlgos = {"sgp", "osgp", "dpsgd", "local", "exact"};

// Where a node is, for messages: "FILE:LINE:COLUMN".
class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const toml::source_region& where, const std::string& key,
                         const std::string& what) const {
    throw InputError(
        fmt::format("{}:{}:{}: {}: {}", file_, where.begin.line, where.begin.column, key, what));
  }
  [[noreturn]] void fail(const toml::node& node, const std::string& key,
                         const std::string& what) const {
    fail(node.source(), key, what);
  }

  double number(const toml::node& n, const std::string& key) const {
    if (n.is_integer()) return static_cast<double>(*n.value<std::int64_t>());
    if (n.is_floating_point()) return *n.value<double>();
    fail(n, key, fmt::format("expected a number, got {}", type_name(n)));
  }
  std::int64_t integer(const toml::node& n, const std::string& key) const {
    if (!n.is_integer()) fail(n, key, fmt::format("expected an integer, got {}", type_name(n)));
    return *n.value<std::int64_t>();
  }
  std::int64_t integer_at_least(const toml::node& n, const std::string& key,
                                std::int64_t min) const {
    const auto v = integer(n, key);
    if (v < min) fail(n, key, fmt::format("expected an integer >= {}, got {}", min, v));
    return v;
  }
  double number_in(const toml::node& n, const std::string& key, double min, double max,
                   bool min_open) const {
    const double v = number(n, key);
    if (!std::isfinite(v) || v < min || v > max || (min_open && v == min)) {
      const std::string range = std::isinf(max)
                                    ? fmt::format("{} {}", min_open ? ">" : ">=", min)
                                    : fmt::format("in {}{}, {}]", min_open ? "(" : "[", min, max);
      fail(n, key, fmt::format("expected a number {}, got {}", range, v));
    }
    return v;
  }
  // A string that `parse` accepts (it throws InputError saying why not).
  template <class Parse>
  std::string parsed_string(const toml::node& n, const std::string& key, Parse parse) const {
    auto v = string(n, key);
    try {
      parse(v);
    } catch (const InputError& e) {
      fail(n, key, e.what());
    }
    return v;
  }
  bool boolean(const toml::node& n, const std::string& key) const {
    if (!n.is_boolean()) fail(n, key, fmt::format("expected true or false, got {}", type_name(n)));
    return *n.value<bool>();
  }
  std::string string(const toml::node& n, const std::string& key) const {
    if (!n.is_string()) fail(n, key, fmt::format("expected a string, got {}", type_name(n)));
    return *n.value<std::string>();
  }
  std::string one_of(const toml::node& n, const std::string& key,
                     const std::vector<std::string>& valid) const {
    auto v = string(n, key);
    if (std::find(valid.begin(), valid.end(), v) == valid.end()) {
      fail(n, key, fmt::format("'{}' is not one of {}", v, fmt::join(valid, ", ")));
    }
    return v;
  }
  const toml::table& table(const toml::node& n, const std::string& key) const {
    if (!n.is_table()) fail(n, key, fmt::format("expected a table, got {}", type_name(n)));
    return *n.as_table();
  }
  // A list of values, each handed to `each`; a single value counts as a list of one.
  void list(const toml::node& n, const std::string& key,
            const std::function<void(const toml::node&)>& each) const {
    if (const auto* array = n.as_array()) {
      if (array->empty()) fail(n, key, "empty list: give at least one value");
      for (const auto& item : *array) each(item);
    } else if (n.is_table()) {
      fail(n, key, "expected a value or a list of values, got a table");
    } else {
      each(n);
    }
  }

  static std::string type_name(const toml::node& n) {
    switch (n.type()) {
      case toml::node_type::string:
        return "a string";
      case toml::node_type::integer:
        return "an integer";
      case toml::node_type::floating_point:
        return "a floating-point number";
      case toml::node_type::boolean:
        return "a boolean";
      case toml::node_type::array:
        return "a list";
      case toml::node_type::table:
        return "a table";
      default:
        return "a date or time";
    }
  }

  const std::string& file() const { return file_; }

 private:
  std::string file_;
};

using Setter =
    std::function<void(TrainConfig&, const Reader&, const toml::node&, const std::string&)>;

// The [train] / [quick] keys and how each sets a TrainConfig field (validated like the CLI flag).
const std::map<std::string, Setter>& train_keys() {
  using R = const Reader&;
  using N = const toml::node&;
  using K = const std::string&;
  static const std::map<std::string, Setter> keys = {
      {"model", [](TrainConfig& c, R r, N n,
                   K k) { c.model = r.parsed_string(n, k, model::parse_model_spec); }},
      {"hidden",  // the same as model = "mlp:W1,W2,..."
       [](TrainConfig& c, R r, N n, K k) {
         std::vector<int> widths;
         r.list(n, k, [&](N item) {
           widths.push_back(static_cast<int>(r.integer_at_least(item, k, 1)));
         });
         c.model = model::mlp_spec(widths).text;
       }},
      {"data_dir", [](TrainConfig& c, R r, N n, K k) { c.data_dir = r.string(n, k); }},
      {"epochs",
       [](TrainConfig& c, R r, N n, K k) { c.epochs = r.number_in(n, k, 0.0, kNoMax, true); }},
      {"max_iterations",
       [](TrainConfig& c, R r, N n, K k) { c.max_iterations = r.integer_at_least(n, k, 0); }},
      {"batch_size", [](TrainConfig& c, R r, N n,
                        K k) { c.batch_size = static_cast<int>(r.integer_at_least(n, k, 1)); }},
      {"lr", [](TrainConfig& c, R r, N n, K k) { c.lr = r.number_in(n, k, 0.0, kNoMax, false); }},
      {"lr_scaling",
       [](TrainConfig& c, R r, N n, K k) {
         c.lr_scaling = r.one_of(n, k, {"none", "linear"});
       }},
      {"warmup_epochs", [](TrainConfig& c, R r, N n,
                           K k) { c.warmup_epochs = r.number_in(n, k, 0.0, kNoMax, false); }},
      {"lr_decay",
       [](TrainConfig& c, R r, N n, K k) {
         c.lr_decay = r.one_of(n, k, {"constant", "step", "cosine"});
       }},
      {"lr_milestones",
       [](TrainConfig& c, R r, N n, K k) {
         c.lr_milestones.clear();
         if (const auto* a = n.as_array(); a && a->empty()) return;
         r.list(n, k, [&](N item) {
           c.lr_milestones.push_back(r.number_in(item, k, 0.0, kNoMax, false));
         });
       }},
      {"lr_gamma",
       [](TrainConfig& c, R r, N n, K k) { c.lr_gamma = r.number_in(n, k, 0.0, kNoMax, false); }},
      {"momentum",
       [](TrainConfig& c, R r, N n, K k) {
         c.momentum = static_cast<float>(r.number_in(n, k, 0.0, 1.0, false));
       }},
      {"nesterov", [](TrainConfig& c, R r, N n, K k) { c.nesterov = r.boolean(n, k); }},
      {"weight_decay",
       [](TrainConfig& c, R r, N n, K k) {
         c.weight_decay = static_cast<float>(r.number_in(n, k, 0.0, kNoMax, false));
       }},
      {"device", [](TrainConfig& c, R r, N n, K k) { c.device = r.string(n, k); }},
      {"blas_threads", [](TrainConfig& c, R r, N n,
                          K k) { c.blas_threads = static_cast<int>(r.integer_at_least(n, k, 1)); }},
      {"tf32", [](TrainConfig& c, R r, N n, K k) { c.tf32 = r.boolean(n, k); }},
      {"tau", [](TrainConfig& c, R r, N n,
                 K k) { c.tau = static_cast<int>(r.integer_at_least(n, k, 0)); }},
      {"timeout_ms", [](TrainConfig& c, R r, N n,
                        K k) { c.timeout_ms = static_cast<int>(r.integer_at_least(n, k, 1)); }},
      {"checkpoint_every",
       [](TrainConfig& c, R r, N n, K k) { c.checkpoint_every = r.integer_at_least(n, k, 0); }},
      {"log_every",
       [](TrainConfig& c, R r, N n, K k) { c.log_every = r.integer_at_least(n, k, 1); }},
      {"eval_every", [](TrainConfig& c, R r, N n,
                        K k) { c.eval_every_epochs = r.number_in(n, k, 0.0, kNoMax, true); }},
      {"log_level",
       [](TrainConfig& c, R r, N n, K k) {
         c.log_level = r.one_of(n, k, {"trace", "debug", "info", "warn", "error", "off"});
       }},
  };
  return keys;
}

template <class Map>
std::string key_names(const Map& map) {
  std::vector<std::string> names;
  for (const auto& [name, value] : map) names.push_back(name);
  return fmt::format("{}", fmt::join(names, ", "));
}

void apply_train_table(TrainConfig& config, const Reader& r, const toml::table& table,
                       const std::string& section) {
  const auto& keys = train_keys();
  for (const auto& [key, node] : table) {
    const std::string name(key.str());
    const auto it = keys.find(name);
    if (it == keys.end()) {
      r.fail(key.source(), section + "." + name,
             fmt::format("unknown key (valid: {}; algo, topology, peers, self_weight, "
                         "gossip_every, partition and seed belong in [grid])",
                         key_names(keys)));
    }
    it->second(config, r, node, section + "." + name);
  }
}

bool is_topology_kind(const std::string& name) {
  for (auto kind : topology::all_topology_kinds())
    if (topology::topology_kind_name(kind) == name) return true;
  return false;
}

struct TopologyEntry {
  std::string value;  // kind name or resolved path
  bool is_file = false;
  const toml::node* node = nullptr;
};

std::string format_weight(double a) { return a == 0.0 ? "uniform" : fmt::format("{}", a); }

}  // namespace

std::string SweepPoint::name() const {
  const std::string topo =
      topology_is_file ? std::filesystem::path(topology).stem().string() : topology;
  std::string name = fmt::format("{}_n{}_a{}_{}_h{}_s{}", topo, peers, format_weight(self_weight),
                                 algo, gossip_every, seed);
  // The partition only when not IID (names of IID sweeps stay as they were), without its colon.
  if (partition != "iid") {
    std::string p = partition;
    std::erase(p, ':');
    name += "_" + p;
  }
  return name;
}

SweepSpec parse_sweep_spec(std::string_view text, const std::filesystem::path& source, bool quick) {
  const Reader r(source.string());
  toml::table doc;
  try {
    doc = toml::parse(text, source.string());
  } catch (const toml::parse_error& e) {
    r.fail(e.source(), "TOML syntax", std::string(e.description()));
  }

  SweepSpec spec;
  spec.source = source;
  const toml::table* grid = nullptr;
  const toml::table* train = nullptr;
  const toml::table* quick_table = nullptr;
  for (const auto& [key, node] : doc) {
    const std::string name(key.str());
    if (name == "name") {
      spec.name = r.string(node, name);
      const bool safe = !spec.name.empty() && spec.name != "." && spec.name != ".." &&
                        std::all_of(spec.name.begin(), spec.name.end(), [](char ch) {
                          return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' ||
                                 ch == '_' || ch == '.';
                        });
      if (!safe) {
        r.fail(node, name,
               fmt::format("'{}' must be non-empty and use only letters, digits, "
                           "'-', '_' and '.' (it names the results directory)",
                           spec.name));
      }
    } else if (name == "description") {
      spec.description = r.string(node, name);
    } else if (name == "grid") {
      grid = &r.table(node, name);
    } else if (name == "train") {
      train = &r.table(node, name);
    } else if (name == "quick") {
      quick_table = &r.table(node, name);
    } else {
      r.fail(key.source(), name, "unknown key (valid: name, description, grid, train, quick)");
    }
  }
  if (spec.name.empty()) {
    throw InputError(fmt::format("{}: name: missing (the sweep's name, e.g. name = \"my-sweep\")",
                                 source.string()));
  }
  if (!grid) {
    throw InputError(
        fmt::format("{}: grid: missing (a [grid] table with at least one list, e.g. "
                    "topology = [\"ring\", \"complete\"])",
                    source.string()));
  }

  TrainConfig base;
  if (train) apply_train_table(base, r, *train, "train");
  // Checked with or without --quick, so that a mistake in [quick] shows up in a dry run too.
  if (quick_table) {
    TrainConfig quick_config = base;
    apply_train_table(quick_config, r, *quick_table, "quick");
    if (quick) base = quick_config;
  }

  std::vector<TopologyEntry> topologies;
  std::vector<int> peers = {8};
  std::vector<double> self_weights = {0.0};
  std::vector<std::string> algos = {"sgp"};
  std::vector<int> gossip_every = {1};
  std::vector<std::uint64_t> seeds = {0};
  std::vector<std::string> partitions = {"iid"};
  std::map<std::string, std::vector<TopologyEntry>> topology_for_algo;
  std::map<std::string, const toml::node*> topology_for_algo_nodes;

  const auto read_topology = [&](const toml::node& item, const std::string& key) {
    TopologyEntry entry{r.string(item, key), false, &item};
    if (!is_topology_kind(entry.value)) {
      std::filesystem::path path(entry.value);
      if (path.is_relative()) path = source.parent_path() / path;
      if (!std::filesystem::is_regular_file(path)) {
        std::vector<std::string> kinds;
        for (auto kind : topology::all_topology_kinds())
          kinds.emplace_back(topology::topology_kind_name(kind));
        r.fail(item, key,
               fmt::format("'{}' is neither a topology kind ({}) nor an existing DOT file",
                           entry.value, fmt::join(kinds, ", ")));
      }
      entry.value = path.string();
      entry.is_file = true;
    }
    return entry;
  };
  bool grid_has_values = false;
  for (const auto& [key, node] : *grid) {
    const std::string name(key.str());
    const std::string full = "grid." + name;
    grid_has_values = true;
    if (name == "topology") {
      r.list(node, full,
             [&](const toml::node& item) { topologies.push_back(read_topology(item, full)); });
    } else if (name == "peers") {
      peers.clear();
      r.list(node, full, [&](const toml::node& item) {
        peers.push_back(static_cast<int>(r.integer_at_least(item, full, 2)));
      });
    } else if (name == "self_weight") {
      self_weights.clear();
      r.list(node, full, [&](const toml::node& item) {
        const double a = r.number(item, full);
        if (!(a == 0.0 || (a > 0.0 && a < 1.0))) {
          r.fail(item, full,
                 fmt::format("expected a mixing rate in (0, 1), or 0 for the "
                             "topology's own weights; got {}",
                             a));
        }
        self_weights.push_back(a);
      });
    } else if (name == "algo") {
      algos.clear();
      r.list(node, full,
             [&](const toml::node& item) { algos.push_back(r.one_of(item, full, kAlgos)); });
    } else if (name == "gossip_every") {
      gossip_every.clear();
      r.list(node, full, [&](const toml::node& item) {
        gossip_every.push_back(static_cast<int>(r.integer_at_least(item, full, 1)));
      });
    } else if (name == "seed") {
      seeds.clear();
      r.list(node, full, [&](const toml::node& item) {
        seeds.push_back(static_cast<std::uint64_t>(r.integer_at_least(item, full, 0)));
      });
    } else if (name == "partition") {
      partitions.clear();
      r.list(node, full, [&](const toml::node& item) {
        partitions.push_back(r.parsed_string(item, full, data::parse_partition_spec));
      });
    } else if (name == "topology_for_algo") {
      for (const auto& [algo_key, list] : r.table(node, full)) {
        const std::string algo(algo_key.str());
        const std::string sub = full + "." + algo;
        if (std::find(kAlgos.begin(), kAlgos.end(), algo) == kAlgos.end()) {
          r.fail(algo_key.source(), sub,
                 fmt::format("'{}' is not an algo ({})", algo, fmt::join(kAlgos, ", ")));
        }
        auto& entries = topology_for_algo[algo];
        r.list(list, sub,
               [&](const toml::node& item) { entries.push_back(read_topology(item, sub)); });
        topology_for_algo_nodes[algo] = &list;
      }
    } else {
      r.fail(key.source(), full,
             "unknown key (valid: topology, peers, self_weight, algo, gossip_every, seed, "
             "partition, topology_for_algo)");
    }
  }
  if (!grid_has_values) {
    throw InputError(
        fmt::format("{}: grid: empty (give at least one list, e.g. topology = "
                    "[\"ring\", \"complete\"])",
                    source.string()));
  }
  for (const auto& [algo, node] : topology_for_algo_nodes) {
    if (std::find(algos.begin(), algos.end(), algo) == algos.end()) {
      r.fail(*node, "grid.topology_for_algo." + algo,
             fmt::format("'{}' is not in grid.algo ({})", algo, fmt::join(algos, ", ")));
    }
  }
  if (topologies.empty()) topologies.push_back({"one-peer-exponential", false, nullptr});

  std::set<std::string> names;
  for (const auto& algo : algos) {
    const auto over = topology_for_algo.find(algo);
    const auto& algo_topologies = over != topology_for_algo.end() ? over->second : topologies;
    // dpsgd and exact choose their own weights and local does not mix: one point, not one per a.
    const bool uses_self_weight = algo == "sgp" || algo == "osgp";
    const std::vector<double> algo_weights =
        uses_self_weight ? self_weights : std::vector<double>{0.0};
    for (const auto& topo : algo_topologies) {
      const std::vector<int> topo_peers = topo.is_file ? std::vector<int>{0} : peers;
      for (int n : topo_peers) {
        if (!topo.is_file) {
          try {  // catches kinds that do not fit N (a prime torus, a hypercube of 6) up front
            topology::GeneratorOptions options;
            options.num_peers = n;
            topology::generate_topology(topology::parse_topology_kind(topo.value), options);
          } catch (const InputError& e) {
            const std::string what = fmt::format("{} with {} peers: {}", topo.value, n, e.what());
            if (topo.node) r.fail(*topo.node, "grid.topology", what);
            throw InputError(fmt::format("{}: grid.topology: {}", source.string(), what));
          }
        }
        for (double a : algo_weights)
          for (int h : gossip_every)
            for (const auto& partition : partitions)
              for (auto seed : seeds) {
                SweepPoint p;
                p.topology = topo.value;
                p.topology_is_file = topo.is_file;
                p.peers = n;
                p.self_weight = a;
                p.algo = algo;
                p.gossip_every = h;
                p.partition = partition;
                p.seed = seed;
                p.config = base;
                p.config.algo = algo;
                p.config.self_weight = a;
                p.config.gossip_every = h;
                p.config.partition = partition;
                p.config.seed = seed;
                if (!names.insert(p.name()).second) {
                  throw InputError(fmt::format(
                      "{}: grid: two points are both named {} (is a value listed twice, or do "
                      "two topology files share a name?)",
                      source.string(), p.name()));
                }
                spec.points.push_back(std::move(p));
              }
      }
    }
  }
  return spec;
}

SweepSpec read_sweep_file(const std::filesystem::path& path, bool quick) {
  std::ifstream in(path);
  if (!in) throw InputError(fmt::format("{}: cannot read the sweep file", path.string()));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_sweep_spec(text.str(), path, quick);
}

}  // namespace sgp::peer
