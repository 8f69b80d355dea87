#include "sgp/topology/dot_file.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>
#include <utility>

// GCC 12 warns, wrongly, about Boost's edge iterator (an empty boost::optional) in
// write_graphviz at -O2: silence that one warning for Boost's headers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/graphviz.hpp>

#include "sgp/endpoint.hpp"
#include "sgp/error.hpp"
#include "sgp/topology/analysis.hpp"

namespace sgp::topology {

namespace {

// Every attribute is read as text so that we can say exactly what is wrong with a value.
struct DotNode {
  std::string id;
  std::string endpoint;
  std::string public_key;
};
struct DotEdge {
  std::string weight;
  std::string phase;
};
struct DotGraphAttributes {
  std::string period;
  std::string monitor_public_key;
};
using DotGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, DotNode, DotEdge,
                                       DotGraphAttributes>;

constexpr double kColumnTolerance = 1e-9;
constexpr int kMaxPeriod = 1024;  // far above any real schedule; bounds memory
constexpr int kMaxNesting = 100;  // subgraph/attribute nesting; real files use 2 or 3 levels
// period x peers and (edge, phase) pairs: each costs memory (~100 bytes while reading); a
// one-peer exponential graph of 4096 peers needs 49,152 of each.
constexpr std::int64_t kMaxScheduleCells = std::int64_t{1} << 18;
constexpr std::int64_t kMaxEdgeInstances = std::int64_t{1} << 20;

// The problems found in one file; thrown together as one InputError.
class Problems {
 public:
  explicit Problems(std::string source) : source_(std::move(source)) {}
  template <typename... Args>
  void add(fmt::format_string<Args...> format, Args&&... args) {
    lines_.push_back(fmt::format(format, std::forward<Args>(args)...));
  }
  bool empty() const { return lines_.empty(); }
  void throw_if_any() const {
    if (lines_.empty()) return;
    std::string message = fmt::format("topology file {} has {} problem{}:", source_, lines_.size(),
                                      lines_.size() == 1 ? "" : "s");
    for (const std::string& line : lines_) message += fmt::format("\n  {}: {}", source_, line);
    throw InputError(message);
  }

 private:
  std::string source_;
  std::vector<std::string> lines_;
};

bool is_identifier_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
         static_cast<unsigned char>(c) >= 0x80;
}

// Skips what Graphviz does not parse as graph text at text[i]: a comment, a quoted string or a
// preprocessor-style '#' line, counting newlines. Returns whether anything was skipped.
bool skip_non_code(std::string_view text, std::size_t& i, int& line, bool line_start) {
  const char c = text[i];
  if ((line_start && c == '#') || text.compare(i, 2, "//") == 0) {
    while (i < text.size() && text[i] != '\n') ++i;
    return true;
  }
  if (text.compare(i, 2, "/*") == 0) {
    const std::size_t end = text.find("*/", i + 2);
    const std::size_t stop = end == std::string_view::npos ? text.size() : end + 2;
    line += static_cast<int>(std::count(text.begin() + i, text.begin() + stop, '\n'));
    i = stop;
    return true;
  }
  if (c != '"') return false;
  for (++i; i < text.size() && text[i] != '"'; ++i) {
    if (text[i] == '\\') ++i;
    if (i < text.size() && text[i] == '\n') ++line;
  }
  ++i;
  return true;
}

// Calls fn(i, line) for every character of graph text (outside comments and strings); fn
// returns the index to go on from (> i).
template <typename Fn>
void for_each_code_char(std::string_view text, Fn fn) {
  int line = 1;
  bool line_start = true;
  for (std::size_t i = 0; i < text.size();) {
    if (text[i] == '\n') {
      ++line;
      ++i;
      line_start = true;
      continue;
    }
    const bool at_line_start = line_start;
    if (text[i] != ' ' && text[i] != '\t' && text[i] != '\r') line_start = false;
    if (!skip_non_code(text, i, line, at_line_start)) i = fn(i, line);
  }
}

// Graphviz's grammar splits "1e-3" into the numeral 1 and the identifier e-3, and Boost's parser
// then silently drops the rest: a weight of 1e-3 would become 1. Find such numerals (outside
// strings and comments) so the reader can reject them with their line number.
void find_badly_delimited_numbers(std::string_view text, Problems& problems) {
  auto digit = [&](std::size_t j) { return std::isdigit(static_cast<unsigned char>(text[j])); };
  for_each_code_char(text, [&](std::size_t i, int line) -> std::size_t {
    const char c = text[i];
    if (is_identifier_char(c) && !digit(i)) {
      while (i < text.size() && is_identifier_char(text[i])) ++i;
      return i;
    }
    if (!digit(i) && c != '.' && c != '-') return i + 1;
    const std::size_t first = i + (c == '-' ? 1 : 0);
    std::size_t j = first;
    while (j < text.size() && (digit(j) || text[j] == '.')) ++j;
    const bool numeral = j > first && text.substr(i, j - i) != ".";
    if (!numeral || j >= text.size() || !is_identifier_char(text[j])) return std::max(j, i + 1);
    std::size_t k = j;
    while (k < text.size() &&
           (is_identifier_char(text[k]) || text[k] == '.' || text[k] == '+' || text[k] == '-'))
      ++k;
    problems.add(
        "line {}: badly delimited number '{}': Graphviz reads it as '{}' followed by '{}'; "
        "write the value in quotes, e.g. \"{}\"",
        line, text.substr(i, k - i), text.substr(i, j - i), text.substr(j, k - j),
        text.substr(i, k - i));
    return k;
  });
}

// Boost's parser recurses once per nested brace or bracket, and deep nesting overflows the stack
// (20,000 nested braces crashed every peer that read the file): refuse it before Boost sees it.
void check_nesting(std::string_view text, const std::string& source) {
  int depth = 0;
  int deepest_line = 0;
  for_each_code_char(text, [&](std::size_t i, int line) {
    if (text[i] == '{' || text[i] == '[') {
      if (++depth > kMaxNesting && deepest_line == 0) deepest_line = line;
    } else if (text[i] == '}' || text[i] == ']') {
      --depth;
    }
    return i + 1;
  });
  if (deepest_line > 0) {
    throw InputError(fmt::format(
        "topology file {}: line {}: braces or brackets nested more than {} deep; a topology needs "
        "at most a few levels",
        source, deepest_line, kMaxNesting));
  }
}

std::optional<long long> parse_integer(const std::string& s) {
  long long value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return value;
}

// A rank is written canonically: "0", "17", never "017", "+3" or " 3".
std::optional<int> parse_rank(const std::string& s) {
  if (s.empty() || s.size() > 9 || (s.size() > 1 && s[0] == '0')) return std::nullopt;
  if (!std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return std::stoi(s);
}

std::optional<double> parse_number(const std::string& s) {
  double value = 0.0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || end != s.data() + s.size()) return std::nullopt;
  if (ec == std::errc::result_out_of_range) return std::nullopt;
  return value;
}

// A CURVE key in Z85 (ZeroMQ RFC 32): 40 characters of its alphabet, each group of 5 a value
// below 2^32.
bool is_z85_key(const std::string& key) {
  static constexpr std::string_view kAlphabet =
      "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";
  if (key.size() != 40) return false;
  for (std::size_t group = 0; group < key.size(); group += 5) {
    std::uint64_t value = 0;
    for (std::size_t i = group; i < group + 5; ++i) {
      const auto digit = kAlphabet.find(key[i]);
      if (digit == std::string_view::npos) return false;
      value = value * 85 + digit;
    }
    if (value > 0xffffffffull) return false;
  }
  return true;
}

// One edge as read, with its place in the file for messages.
struct ReadEdge {
  int target = 0;
  std::optional<double> weight;
  std::string name;  // "edge 2 -> 5 (phase 1)"
};

struct Column {
  std::vector<ReadEdge> out;
  std::optional<ReadEdge> self;
};

std::string edge_name(int s, int t, const std::string& phase) {
  return phase.empty() ? fmt::format("edge {} -> {}", s, t)
                       : fmt::format("edge {} -> {} (phase {})", s, t, phase);
}

// A weight attribute: empty (none) or a finite number >= 0, and > 0 on an edge to another rank;
// nullopt (and a problem) otherwise.
std::optional<double> check_weight(const std::string& name, const std::string& text, bool self_edge,
                                   Problems& problems) {
  if (text.empty()) return std::nullopt;
  const auto weight = parse_number(text);
  if (!weight)
    problems.add("{}: weight '{}' is not a number", name, text);
  else if (!std::isfinite(*weight))
    problems.add("{}: weight {} is not finite", name, text);
  else if (*weight < 0.0)
    problems.add("{}: weight {} is negative; expected a weight >= 0", name, text);
  else if (*weight == 0.0 && !self_edge)
    problems.add(
        "{}: weight {} pushes nothing, yet its receiver would wait for it every round; remove "
        "the edge or give it a positive weight",
        name, text);
  else
    return weight;
  return std::nullopt;
}

// A phase attribute in 0..period-1 (period 0: unknown, the period attribute itself is broken).
std::optional<int> check_phase(const std::string& name, const std::string& text, bool static_graph,
                               int period, Problems& problems) {
  const auto p = parse_integer(text);
  if (!p)
    problems.add("{}: phase '{}' is not an integer", name, text);
  else if (static_graph && *p != 0)
    problems.add(
        "{}: phase {} but the graph has no period attribute (a static graph has only "
        "phase 0; add e.g. period={} to the graph)",
        name, *p, *p + 1);
  else if (period > 0 && (*p < 0 || *p >= period))
    problems.add("{}: phase {} is outside 0..{} (period {})", name, *p, period - 1, period);
  else if (period > 0)
    return static_cast<int>(*p);
  return std::nullopt;
}

// Turns the edges of one rank in one phase into its weights (rules in dot_file.hpp); reports
// problems and returns the self weight (or nothing when the column is broken).
std::optional<double> resolve_column(int rank, int phase, int period, Column& column,
                                     const DotReadOptions& options, Problems& problems) {
  const std::string where =
      period > 1 ? fmt::format("rank {} in phase {}", rank, phase) : fmt::format("rank {}", rank);
  const auto weighted = std::count_if(column.out.begin(), column.out.end(),
                                      [](const ReadEdge& e) { return e.weight.has_value(); });
  const auto d = static_cast<long>(column.out.size());
  if (weighted > 0 && weighted < d) {
    std::string with, without;
    for (const ReadEdge& e : column.out) {
      std::string& list = e.weight ? with : without;
      list += (list.empty() ? "" : ", ") + e.name;
    }
    problems.add(
        "{}: {} {} a weight but {} {} none: give every out-edge of a rank a weight, or "
        "none",
        where, with, weighted == 1 ? "has" : "have", without, d - weighted == 1 ? "has" : "have");
    return std::nullopt;
  }
  const std::optional<double> self_edge =
      column.self ? column.self->weight : std::optional<double>();
  if (weighted == d && d > 0) {
    double sum = 0.0;
    for (const ReadEdge& e : column.out) sum += *e.weight;
    if (self_edge) {
      if (std::abs(sum + *self_edge - 1.0) > kColumnTolerance) {
        problems.add(
            "{}: self-edge weight {} conflicts with its out-edges, which leave it "
            "1 - {} = {} (a column of weights must sum to 1)",
            column.self->name, *self_edge, sum, 1.0 - sum);
        return std::nullopt;
      }
      return *self_edge;
    }
    if (sum > 1.0 + kColumnTolerance) {
      problems.add(
          "{}: the weights of its out-edges sum to {}, above 1 (a column of weights, "
          "self weight included, must sum to 1)",
          where, sum);
      return std::nullopt;
    }
    return std::max(0.0, 1.0 - sum);
  }
  // No out-edge weights.
  if (self_edge) {
    if (d == 0 && std::abs(*self_edge - 1.0) > kColumnTolerance) {
      problems.add(
          "{}: {} pushes to nobody, so it keeps everything: its self weight must be 1, "
          "not {}",
          column.self->name, where, *self_edge);
      return std::nullopt;
    }
    if (*self_edge > 1.0 + kColumnTolerance) {
      problems.add("{}: self weight {} is above 1 (a column of weights must sum to 1)",
                   column.self->name, *self_edge);
      return std::nullopt;
    }
    const double self = d == 0 ? 1.0 : std::min(*self_edge, 1.0);
    if (d > 0 && self == 1.0) {
      problems.add(
          "{}: self weight {} leaves nothing for the out-edges of {}, whose receivers would wait "
          "for them every round; lower it or remove the out-edges",
          column.self->name, *self_edge, where);
      return std::nullopt;
    }
    for (ReadEdge& e : column.out) e.weight = (1.0 - self) / static_cast<double>(d);
    return self;
  }
  if (d == 0) return 1.0;
  if (!options.self_weight) {  // uniform, computed exactly as the generators do
    const double uniform = 1.0 / static_cast<double>(d + 1);
    for (ReadEdge& e : column.out) e.weight = uniform;
    return uniform;
  }
  for (ReadEdge& e : column.out) e.weight = (1.0 - *options.self_weight) / static_cast<double>(d);
  return *options.self_weight;
}

// Boost's parse of the text; on a syntax error the graph may be empty (then the problems are
// thrown at once: nothing else can be checked).
DotGraph read_graph(std::string_view text, Problems& problems) {
  DotGraph g;
  boost::dynamic_properties dp(boost::ignore_other_properties);
  dp.property("node_id", boost::get(&DotNode::id, g));
  dp.property("endpoint", boost::get(&DotNode::endpoint, g));
  dp.property("public_key", boost::get(&DotNode::public_key, g));
  dp.property("weight", boost::get(&DotEdge::weight, g));
  dp.property("phase", boost::get(&DotEdge::phase, g));
  boost::ref_property_map<DotGraph*, std::string> period_map(g[boost::graph_bundle].period);
  dp.property("period", period_map);
  boost::ref_property_map<DotGraph*, std::string> monitor_key_map(
      g[boost::graph_bundle].monitor_public_key);
  dp.property("monitor_public_key", monitor_key_map);
  try {
    std::string copy(text);
    if (!boost::read_graphviz(copy, g, dp, "node_id"))
      problems.add("Graphviz could not read the file (expected a digraph)");
  } catch (const boost::undirected_graph_error&) {
    problems.add("the file holds an undirected `graph`; expected a `digraph` (edges a -> b)");
  } catch (const boost::bad_graphviz_syntax& e) {
    problems.add("syntax error: {}", e.what());
  } catch (const boost::graph_exception& e) {
    problems.add("cannot read the graph: {}", e.what());
  }
  if (!problems.empty() && boost::num_vertices(g) == 0) problems.throw_if_any();
  return g;
}

struct Period {
  int value = 1;
  bool known = true;   // false: the attribute is broken (phases cannot be checked against it)
  bool given = false;  // the graph has a period attribute
};

Period read_period(const DotGraph& g, Problems& problems) {
  Period period;
  const std::string& text = g[boost::graph_bundle].period;
  period.given = !text.empty();
  if (!period.given) return period;
  const auto p = parse_integer(text);
  if (!p || *p < 1 || *p > kMaxPeriod) {
    problems.add("graph attribute period='{}': expected an integer in 1..{}", text, kMaxPeriod);
    period.known = false;
  } else {
    period.value = static_cast<int>(*p);
  }
  return period;
}

// Nodes must be exactly the ranks 0..N-1.
struct Ranks {
  std::vector<std::optional<int>> rank_of;  // per vertex; nullopt: a bad node, reported
};

Ranks read_ranks(const DotGraph& g, Problems& problems) {
  const int n = static_cast<int>(boost::num_vertices(g));
  if (n == 0) problems.add("the graph has no nodes; expected nodes named by the ranks 0..N-1");
  Ranks ranks{std::vector<std::optional<int>>(n)};
  std::vector<int> vertex_of_rank(n, -1);
  for (int v = 0; v < n; ++v) {
    const std::string& id = g[v].id;
    const auto rank = parse_rank(id);
    if (!rank) {
      problems.add(
          "node '{}': its name must be its rank, an integer 0..{} written without "
          "leading zeros",
          id, n - 1);
    } else if (*rank >= n) {
      problems.add(
          "node {}: rank {} is outside 0..{} (the file has {} nodes, so the ranks must "
          "be 0..{})",
          id, *rank, n - 1, n, n - 1);
    } else {
      ranks.rank_of[v] = *rank;
      vertex_of_rank[*rank] = v;
    }
  }
  const bool all_valid = std::all_of(ranks.rank_of.begin(), ranks.rank_of.end(),
                                     [](const auto& r) { return r.has_value(); });
  if (!all_valid) {  // n distinct valid ranks below n would cover 0..n-1
    for (int r = 0; r < n; ++r)
      if (vertex_of_rank[r] < 0)
        problems.add("rank {} has no node (ranks must be 0..{})", r, n - 1);
  }
  return ranks;
}

// A per-node text attribute (endpoint, public_key): all nodes or none (all when `required`),
// each value valid and distinct (unless `may_repeat` it). Returns the values by rank, or empty
// when no node has one.
template <typename Valid, typename MayRepeat>
std::vector<std::string> read_node_attribute(const DotGraph& g, const Ranks& ranks,
                                             std::string DotNode::*field, const char* name,
                                             const char* example, bool required, Valid valid,
                                             MayRepeat may_repeat, Problems& problems) {
  const int n = static_cast<int>(ranks.rank_of.size());
  std::vector<std::string> values(n);
  int with_value = 0;
  for (int v = 0; v < n; ++v) with_value += (g[v].*field).empty() ? 0 : 1;
  std::map<std::string, std::string> owner;  // value -> node
  for (int v = 0; v < n; ++v) {
    const std::string& value = g[v].*field;
    if (value.empty()) {
      if (with_value > 0 || required)
        problems.add("node {}: no {}; expected an attribute like {}{}", g[v].id, name, example,
                     with_value > 0 ? " (other nodes have one)" : "");
    } else if (const std::string why = valid(value); !why.empty()) {
      problems.add("node {}: {} '{}' {}", g[v].id, name, value, why);
    } else if (may_repeat(value)) {
    } else if (auto [it, fresh] = owner.emplace(value, g[v].id); !fresh) {
      problems.add("node {}: {} {} is already node {}'s; two peers cannot share one", g[v].id, name,
                   value, it->second);
    }
    if (ranks.rank_of[v]) values[*ranks.rank_of[v]] = value;
  }
  return with_value > 0 ? values : std::vector<std::string>{};
}

std::vector<std::string> read_endpoints(const DotGraph& g, const Ranks& ranks,
                                        const DotReadOptions& options, Problems& problems) {
  return read_node_attribute(
      g, ranks, &DotNode::endpoint, "endpoint", "endpoint=\"tcp://10.0.0.3:5600\"",
      options.require_endpoints,
      [](const std::string& e) {
        Endpoint parsed;
        const std::string why = Endpoint::problem(e, parsed);
        return why.empty() ? why
                           : fmt::format("is not a ZeroMQ address like tcp://host:port ({})", why);
      },
      // Port 0 (or *): each rank gets a port of its own when it starts (sgp launch picks them).
      [](const std::string& e) {
        const auto parsed = Endpoint::parse(e);
        return parsed && parsed->leaves_port_open();
      },
      problems);
}

constexpr const char* kKeyProblem =
    "is not a CURVE public key (40 Z85 characters, as `sgp keygen` writes)";

// CURVE public keys (`sgp keygen`): per node, and the monitor's as a graph attribute.
std::vector<std::string> read_public_keys(const DotGraph& g, const Ranks& ranks,
                                          Problems& problems) {
  auto keys = read_node_attribute(
      g, ranks, &DotNode::public_key, "public_key", "public_key=\"<40 Z85 characters>\"", false,
      [](const std::string& k) { return is_z85_key(k) ? "" : kKeyProblem; },
      [](const std::string&) { return false; }, problems);
  const std::string& monitor = g[boost::graph_bundle].monitor_public_key;
  if (!monitor.empty()) {
    if (!is_z85_key(monitor)) {
      problems.add("graph attribute monitor_public_key='{}' {}", monitor, kKeyProblem);
    } else if (keys.empty()) {
      problems.add(
          "graph attribute monitor_public_key: the nodes have no public_key (keys are "
          "all or none; run `sgp keygen`)");
    } else if (std::find(keys.begin(), keys.end(), monitor) != keys.end()) {
      problems.add("graph attribute monitor_public_key is also a node's public_key");
    }
  }
  return keys;
}

// Refuses graphs whose schedule would take unreasonable memory, before it is built: the reader
// holds period x N columns and one entry per (edge, phase).
void check_size(const DotGraph& g, const Period& period, const std::string& source) {
  const auto n = static_cast<std::int64_t>(boost::num_vertices(g));
  std::int64_t instances = 0;
  for (const auto& e : boost::make_iterator_range(boost::edges(g)))
    instances += g[e].phase.empty() ? period.value : 1;
  if (n * period.value > kMaxScheduleCells || instances > kMaxEdgeInstances) {
    throw InputError(fmt::format(
        "topology file {}: too large: {} peers x period {} = {} (rank, phase) pairs and {} "
        "(edge, phase) pairs; at most {} and {} are supported",
        source, n, period.value, n * period.value, instances, kMaxScheduleCells,
        kMaxEdgeInstances));
  }
}

// The phases an edge is active in: all of them without a phase attribute, else its one phase
// (none when the attribute is broken, which is reported).
std::vector<int> edge_phases(const std::string& name, const std::string& phase,
                             const Period& period, Problems& problems) {
  std::vector<int> phases;
  if (phase.empty()) {
    for (int p = 0; p < period.value; ++p) phases.push_back(p);
  } else if (const auto p = check_phase(name, phase, !period.given, period.known ? period.value : 0,
                                        problems)) {
    phases.push_back(*p);
  }
  return phases;
}

using Columns = std::vector<std::vector<Column>>;                    // [phase][rank]
using SeenEdges = std::map<std::tuple<int, int, int>, std::string>;  // (phase, s, t) -> name

// Files one edge (s -> t, `name`) into the columns of its phases; a repeat is reported.
void add_edge(int s, int t, const std::string& name, const DotEdge& attributes,
              const Period& period, Columns& columns, SeenEdges& seen, Problems& problems) {
  const std::optional<double> weight = check_weight(name, attributes.weight, s == t, problems);
  const bool ok = attributes.weight.empty() || weight.has_value();
  std::vector<int> repeated_in;
  std::string first;
  for (int p : edge_phases(name, attributes.phase, period, problems)) {
    const std::string phase_name = edge_name(s, t, period.value > 1 ? std::to_string(p) : "");
    if (auto [it, fresh] = seen.emplace(std::make_tuple(p, s, t), name); !fresh) {
      if (repeated_in.empty()) first = it->second;
      repeated_in.push_back(p);
    } else if (ok) {
      ReadEdge read{t, weight, phase_name};
      if (s == t)
        columns[p][s].self = read;
      else
        columns[p][s].out.push_back(read);
    }
  }
  if (!repeated_in.empty())
    problems.add("{} appears twice{}: also as {}; each edge may appear once per phase", name,
                 period.value == 1 ? ""
                 : repeated_in.size() == 1
                     ? fmt::format(" in phase {}", repeated_in[0])
                     : fmt::format(" in phases {}", fmt::join(repeated_in, ", ")),
                 first);
}

// Edges, into columns [phase][rank], in file order per source (vertices appear in file order
// and each one's out-edges keep theirs).
Columns read_edges(const DotGraph& g, const Ranks& ranks, const Period& period,
                   Problems& problems) {
  const int n = static_cast<int>(ranks.rank_of.size());
  Columns columns(period.value, std::vector<Column>(n));
  SeenEdges seen;
  for (int v = 0; v < n; ++v) {
    for (const auto& e : boost::make_iterator_range(boost::out_edges(v, g))) {
      const auto s = ranks.rank_of[v];
      const auto t = ranks.rank_of[boost::target(e, g)];
      if (!s || !t) continue;  // the node is already reported
      add_edge(*s, *t, edge_name(*s, *t, g[e].phase), g[e], period, columns, seen, problems);
    }
  }
  return columns;
}

struct Weights {
  std::vector<std::vector<std::vector<Push>>> out_edges;  // [phase][rank]
  std::vector<std::vector<double>> self_weights;          // [phase][rank]
};

// Weights per column (rules in dot_file.hpp).
Weights resolve_columns(Columns& columns, const DotReadOptions& options, Problems& problems) {
  const int period = static_cast<int>(columns.size());
  const int n = period > 0 ? static_cast<int>(columns[0].size()) : 0;
  Weights w{std::vector<std::vector<std::vector<Push>>>(period, std::vector<std::vector<Push>>(n)),
            std::vector<std::vector<double>>(period, std::vector<double>(n, 1.0))};
  for (int p = 0; p < period; ++p)
    for (int i = 0; i < n; ++i) {
      const auto self = resolve_column(i, p, period, columns[p][i], options, problems);
      if (!self) continue;
      w.self_weights[p][i] = *self;
      for (const ReadEdge& e : columns[p][i].out)
        w.out_edges[p][i].push_back({e.target, *e.weight});
    }
  return w;
}

// The union graph's connectivity from every edge in the file, whatever its weight's or phase's
// problems (those are listed apart).
void check_connected(const DotGraph& g, const Ranks& ranks, Problems& problems) {
  const auto n = ranks.rank_of.size();
  if (n <= 1) return;
  std::vector<std::vector<int>> out(n);
  for (std::size_t v = 0; v < n; ++v) {
    for (const auto& e : boost::make_iterator_range(boost::out_edges(v, g))) {
      const auto s = ranks.rank_of[v];
      const auto t = ranks.rank_of[boost::target(e, g)];
      if (s && t && *s != *t) out[*s].push_back(*t);
    }
  }
  const auto components = strong_components_of(out);
  if (components.size() > 1) problems.add("{}", not_strongly_connected_text(components));
}

}  // namespace

Schedule parse_dot(std::string_view text, const std::string& source_name,
                   const DotReadOptions& options) {
  if (options.self_weight && !(*options.self_weight > 0.0 && *options.self_weight < 1.0))
    throw InputError(
        fmt::format("self weight must be strictly between 0 and 1, got {}", *options.self_weight));
  check_nesting(text, source_name);
  Problems problems(source_name);
  find_badly_delimited_numbers(text, problems);
  const DotGraph g = read_graph(text, problems);
  const Period period = read_period(g, problems);
  const Ranks ranks = read_ranks(g, problems);
  auto endpoints = read_endpoints(g, ranks, options, problems);
  auto keys = read_public_keys(g, ranks, problems);
  check_size(g, period, source_name);
  auto columns = read_edges(g, ranks, period, problems);
  if (options.require_strongly_connected) check_connected(g, ranks, problems);
  problems.throw_if_any();
  auto [out_edges, self_weights] = resolve_columns(columns, options, problems);
  problems.throw_if_any();
  Schedule schedule(static_cast<int>(ranks.rank_of.size()), std::move(out_edges),
                    std::move(self_weights), std::move(endpoints));
  schedule.set_public_keys(std::move(keys), g[boost::graph_bundle].monitor_public_key);
  return schedule;
}

Schedule read_dot_file(const std::filesystem::path& path, const DotReadOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open the topology file", path.string()));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw InputError(fmt::format("{}: cannot read the topology file", path.string()));
  return parse_dot(text.str(), path.string(), options);
}

void write_dot(const Schedule& schedule, std::ostream& out, std::string_view comment) {
  const int n = schedule.num_peers();
  const int period = schedule.period();
  DotGraph g;
  for (int i = 0; i < n; ++i)
    boost::add_vertex(
        DotNode{std::to_string(i), schedule.has_endpoints() ? schedule.endpoint(i) : std::string(),
                schedule.has_public_keys() ? schedule.public_key(i) : std::string()},
        g);
  // Write only the weights the reader cannot infer (so a file of uniform weights stays free of
  // numbers, and the --self-weight option applies to it). Each test below repeats the reader's
  // arithmetic, so reading gives back the same doubles. fmt's "{}" is the shortest text that
  // reads back as the same double.
  for (int p = 0; p < period; ++p) {
    const std::string phase = period > 1 ? std::to_string(p) : "";
    for (int i = 0; i < n; ++i) {
      const auto& pushes = schedule.out_edges(i, p);
      const double self = schedule.self_weight(i, p);
      const auto d = static_cast<double>(pushes.size());
      auto all_out = [&](double w) {
        return std::all_of(pushes.begin(), pushes.end(),
                           [w](const Push& push) { return push.weight == w; });
      };
      const bool uniform = self == 1.0 / (d + 1.0) && all_out(1.0 / (d + 1.0));
      const bool self_only = !uniform && !pushes.empty() && all_out((1.0 - self) / d);
      if (!uniform) boost::add_edge(i, i, DotEdge{fmt::format("{}", self), phase}, g);
      for (const Push& push : pushes)
        boost::add_edge(
            i, push.peer,
            DotEdge{uniform || self_only ? std::string() : fmt::format("{}", push.weight), phase},
            g);
    }
  }
  std::istringstream lines{std::string(comment)};
  for (std::string line; std::getline(lines, line);) out << "// " << line << '\n';
  // Attributes with an empty value are left out.
  auto attributes = [](std::ostream& os,
                       std::initializer_list<std::pair<const char*, const std::string*>> list) {
    bool first = true;
    for (const auto& [name, value] : list) {
      if (value->empty()) continue;
      os << (first ? " [" : ", ") << name << "=" << boost::escape_dot_string(*value);
      first = false;
    }
    if (!first) os << "]";
  };
  boost::write_graphviz(
      out, g,
      [&](std::ostream& os, auto v) {
        attributes(os, {{"endpoint", &g[v].endpoint}, {"public_key", &g[v].public_key}});
      },
      [&](std::ostream& os, auto e) {
        attributes(os, {{"phase", &g[e].phase}, {"weight", &g[e].weight}});
      },
      [&](std::ostream& os) {
        if (period > 1) os << "period=" << period << ";\n";
        if (!schedule.monitor_public_key().empty())
          os << "monitor_public_key=" << boost::escape_dot_string(schedule.monitor_public_key())
             << ";\n";
      },
      boost::get(&DotNode::id, g));
}

std::string to_dot(const Schedule& schedule, std::string_view comment) {
  std::ostringstream out;
  write_dot(schedule, out, comment);
  return out.str();
}

void write_dot_file(const Schedule& schedule, const std::filesystem::path& path,
                    std::string_view comment) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw IoError(fmt::format("{}: cannot open for writing", path.string()));
  write_dot(schedule, out, comment);
  out.flush();
  if (!out) throw IoError(fmt::format("{}: write failed", path.string()));
}

}  // namespace sgp::topology
