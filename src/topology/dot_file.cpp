#include "sgp/topology/dot_file.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

// GCC 12 warns, wrongly, about Boost's edge iterator (an empty boost::optional) in
// write_graphviz at -O2: silence that one warning for Boost's headers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/graphviz.hpp>

#include "sgp/error.hpp"

namespace sgp::topology {

namespace {

// Every attribute is read as text so that we can say exactly what is wrong with a value.
struct DotNode {
  std::string id;
  std::string endpoint;
};
struct DotEdge {
  std::string weight;
  std::string phase;
};
struct DotGraphAttributes {
  std::string period;
};
using DotGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, DotNode, DotEdge,
                                       DotGraphAttributes>;

constexpr double kColumnTolerance = 1e-9;
constexpr int kMaxPeriod = 1024;  // far above any real schedule; bounds memory

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

// Graphviz's grammar splits "1e-3" into the numeral 1 and the identifier e-3, and Boost's parser
// then silently drops the rest: a weight of 1e-3 would become 1. Find such numerals (outside
// strings and comments) so the reader can reject them with their line number.
void find_badly_delimited_numbers(std::string_view text, Problems& problems) {
  int line = 1;
  std::size_t i = 0;
  bool line_start = true;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      ++i;
      line_start = true;
      continue;
    }
    if (line_start && c == '#') {  // preprocessor-style line: skipped by Graphviz
      while (i < text.size() && text[i] != '\n') ++i;
      continue;
    }
    if (c != ' ' && c != '\t' && c != '\r') line_start = false;
    if (text.compare(i, 2, "//") == 0) {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (text.compare(i, 2, "/*") == 0) {
      const std::size_t end = text.find("*/", i + 2);
      const std::size_t stop = end == std::string_view::npos ? text.size() : end + 2;
      line += static_cast<int>(std::count(text.begin() + i, text.begin() + stop, '\n'));
      i = stop;
    } else if (c == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\') ++i;
        if (i < text.size() && text[i] == '\n') ++line;
      }
      ++i;
    } else if (std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == '-') {
      std::size_t j = i + (c == '-' ? 1 : 0);
      while (j < text.size() &&
             (std::isdigit(static_cast<unsigned char>(text[j])) || text[j] == '.'))
        ++j;
      const bool numeral = j > i + (c == '-' ? 1 : 0) && text.substr(i, j - i) != "-" &&
                           text.substr(i, j - i) != ".";
      if (numeral && j < text.size() && is_identifier_char(text[j])) {
        std::size_t k = j;
        while (k < text.size() &&
               (is_identifier_char(text[k]) || text[k] == '.' || text[k] == '+' || text[k] == '-'))
          ++k;
        problems.add(
            "line {}: badly delimited number '{}': Graphviz reads it as '{}' followed by '{}'; "
            "write the value in quotes, e.g. \"{}\"",
            line, text.substr(i, k - i), text.substr(i, j - i), text.substr(j, k - j),
            text.substr(i, k - i));
        i = k;
      } else {
        i = std::max(j, i + 1);
      }
    } else if (is_identifier_char(c)) {
      while (i < text.size() && is_identifier_char(text[i])) ++i;
    } else {
      ++i;
    }
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

bool looks_like_endpoint(const std::string& e) {
  const auto scheme = e.find("://");
  return scheme != std::string::npos && scheme > 0 && scheme + 3 < e.size() &&
         e.find_first_of(" \t\r\n") == std::string::npos;
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

// A weight attribute: empty (none) or a finite number >= 0; nullopt (and a problem) otherwise.
std::optional<double> check_weight(const std::string& name, const std::string& text,
                                   Problems& problems) {
  if (text.empty()) return std::nullopt;
  const auto weight = parse_number(text);
  if (!weight)
    problems.add("{}: weight '{}' is not a number", name, text);
  else if (!std::isfinite(*weight))
    problems.add("{}: weight {} is not finite", name, text);
  else if (*weight < 0.0)
    problems.add("{}: weight {} is negative; expected a weight >= 0", name, text);
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

}  // namespace

Schedule parse_dot(std::string_view text, const std::string& source_name,
                   const DotReadOptions& options) {
  if (options.self_weight && !(*options.self_weight > 0.0 && *options.self_weight < 1.0))
    throw InputError(
        fmt::format("self weight must be strictly between 0 and 1, got {}", *options.self_weight));
  Problems problems(source_name);
  find_badly_delimited_numbers(text, problems);

  DotGraph g;
  boost::dynamic_properties dp(boost::ignore_other_properties);
  dp.property("node_id", boost::get(&DotNode::id, g));
  dp.property("endpoint", boost::get(&DotNode::endpoint, g));
  dp.property("weight", boost::get(&DotEdge::weight, g));
  dp.property("phase", boost::get(&DotEdge::phase, g));
  boost::ref_property_map<DotGraph*, std::string> period_map(g[boost::graph_bundle].period);
  dp.property("period", period_map);
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

  // Period.
  int period = 1;
  bool period_known = true;
  const std::string& period_text = g[boost::graph_bundle].period;
  if (!period_text.empty()) {
    const auto p = parse_integer(period_text);
    if (!p || *p < 1 || *p > kMaxPeriod) {
      problems.add("graph attribute period='{}': expected an integer in 1..{}", period_text,
                   kMaxPeriod);
      period_known = false;
    } else {
      period = static_cast<int>(*p);
    }
  }

  // Nodes: exactly the ranks 0..N-1.
  const int n = static_cast<int>(boost::num_vertices(g));
  if (n == 0) problems.add("the graph has no nodes; expected nodes named by the ranks 0..N-1");
  std::vector<std::optional<int>> rank_of(n);
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
      rank_of[v] = *rank;
      vertex_of_rank[*rank] = v;
    }
  }
  const bool ranks_valid =
      std::all_of(rank_of.begin(), rank_of.end(), [](const auto& r) { return r.has_value(); });
  if (!ranks_valid) {  // n distinct valid ranks below n would cover 0..n-1
    for (int r = 0; r < n; ++r)
      if (vertex_of_rank[r] < 0)
        problems.add("rank {} has no node (ranks must be 0..{})", r, n - 1);
  }

  // Endpoints: all or none (all when required), well-formed and distinct.
  std::vector<std::string> endpoints(n);
  int with_endpoint = 0;
  for (int v = 0; v < n; ++v) with_endpoint += g[v].endpoint.empty() ? 0 : 1;
  std::map<std::string, std::string> owner;  // endpoint -> node
  for (int v = 0; v < n; ++v) {
    const std::string& e = g[v].endpoint;
    if (e.empty()) {
      if (with_endpoint > 0 || options.require_endpoints)
        problems.add(
            "node {}: no endpoint; expected an attribute like "
            "endpoint=\"tcp://10.0.0.3:5600\"{}",
            g[v].id, with_endpoint > 0 ? " (other nodes have one)" : "");
      continue;
    }
    if (!looks_like_endpoint(e)) {
      problems.add("node {}: endpoint '{}' is not a ZeroMQ address like tcp://host:port", g[v].id,
                   e);
    } else if (auto [it, fresh] = owner.emplace(e, g[v].id); !fresh) {
      problems.add("node {}: endpoint {} is already node {}'s; two peers cannot share an address",
                   g[v].id, e, it->second);
    }
    if (rank_of[v]) endpoints[*rank_of[v]] = e;
  }

  // Edges, into columns [phase][rank], in file order per source (vertices appear in file order
  // and each one's out-edges keep theirs).
  std::vector<std::vector<Column>> columns(period, std::vector<Column>(n));
  std::map<std::tuple<int, int, int>, std::string> seen;  // (phase, s, t) -> first edge's name
  for (int v = 0; v < n; ++v) {
    for (const auto& e : boost::make_iterator_range(boost::out_edges(v, g))) {
      const auto s_rank = rank_of[v];
      const auto t_rank = rank_of[boost::target(e, g)];
      if (!s_rank || !t_rank) continue;  // the node is already reported
      const int s = *s_rank, t = *t_rank;
      const DotEdge& attributes = g[e];
      const std::string name = edge_name(s, t, attributes.phase);
      const std::optional<double> weight = check_weight(name, attributes.weight, problems);
      const bool ok = attributes.weight.empty() || weight.has_value();
      std::vector<int> phases;
      if (attributes.phase.empty()) {
        for (int p = 0; p < period; ++p) phases.push_back(p);
      } else if (const auto p = check_phase(name, attributes.phase, period_text.empty(),
                                            period_known ? period : 0, problems)) {
        phases.push_back(*p);
      }
      std::vector<int> repeated_in;
      std::string first;
      for (int p : phases) {
        const std::string phase_name = edge_name(s, t, period > 1 ? std::to_string(p) : "");
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
                     period == 1 ? ""
                     : repeated_in.size() == 1
                         ? fmt::format(" in phase {}", repeated_in[0])
                         : fmt::format(" in phases {}", fmt::join(repeated_in, ", ")),
                     first);
    }
  }
  problems.throw_if_any();

  // Weights per column.
  std::vector<std::vector<std::vector<Push>>> out_edges(period, std::vector<std::vector<Push>>(n));
  std::vector<std::vector<double>> self_weights(period, std::vector<double>(n, 1.0));
  for (int p = 0; p < period; ++p)
    for (int i = 0; i < n; ++i) {
      const auto self = resolve_column(i, p, period, columns[p][i], options, problems);
      if (!self) continue;
      self_weights[p][i] = *self;
      for (const ReadEdge& e : columns[p][i].out) out_edges[p][i].push_back({e.target, *e.weight});
    }
  problems.throw_if_any();
  return Schedule(n, std::move(out_edges), std::move(self_weights),
                  with_endpoint > 0 ? std::move(endpoints) : std::vector<std::string>{});
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
        DotNode{std::to_string(i), schedule.has_endpoints() ? schedule.endpoint(i) : std::string()},
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
        attributes(os, {{"endpoint", &g[v].endpoint}});
      },
      [&](std::ostream& os, auto e) {
        attributes(os, {{"phase", &g[e].phase}, {"weight", &g[e].weight}});
      },
      [&](std::ostream& os) {
        if (period > 1) os << "period=" << period << ";\n";
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
