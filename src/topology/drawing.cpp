#include "sgp/topology/drawing.hpp"

#include <array>

#include <fmt/format.h>

namespace sgp::topology {

namespace {

// ColorBrewer Dark2: distinct phases, readable on white.
constexpr std::array<std::string_view, 8> kPhaseColours = {
    "#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666"};

std::string weight(double w) { return fmt::format("{:.3g}", w); }

// Text inside a Graphviz double-quoted string: only '"' and '\' need escaping.
std::string escaped(std::string_view text) {
  std::string out;
  for (char ch : text) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out;
}

std::string phase_cluster(const Schedule& s, int phase) {
  const auto colour = kPhaseColours[phase % kPhaseColours.size()];
  const std::string label = s.period() == 1
                                ? "every iteration"
                                : fmt::format("phase {} (k % {} == {})", phase, s.period(), phase);
  std::string out = fmt::format(
      "  subgraph cluster_phase{} {{\n    label=\"{}\";\n    color=\"{}\";\n    "
      "fontcolor=\"{}\";\n",
      phase, label, colour, colour);
  for (int rank = 0; rank < s.num_peers(); ++rank) {
    out += fmt::format("    p{}_{} [label=\"{}\\nkeeps {}\"];\n", phase, rank, rank,
                       weight(s.self_weight(rank, phase)));
  }
  for (int rank = 0; rank < s.num_peers(); ++rank) {
    for (const Push& push : s.out_edges(rank, phase)) {
      out += fmt::format("    p{}_{} -> p{}_{} [label=\"{}\", color=\"{}\", fontcolor=\"{}\"];\n",
                         phase, rank, phase, push.peer, weight(push.weight), colour, colour);
    }
  }
  return out + "  }\n";
}

}  // namespace

std::string drawing_dot(const Schedule& schedule, std::string_view title) {
  const std::string heading = fmt::format(
      "{}: {} peers, period {}\\nnode: rank and the weight it keeps (p_ii); edge: the weight "
      "pushed (p_ji)",
      escaped(title), schedule.num_peers(), schedule.period());
  std::string out = fmt::format(
      "// drawn by `sgp topology render`: one cluster per phase, weights on nodes and edges\n"
      "digraph drawing {{\n  label=\"{}\";\n  labelloc=t;\n  fontsize=12;\n"
      "  node [shape=circle, fontsize=10, margin=0.02];\n  edge [fontsize=9];\n",
      heading);
  for (int phase = 0; phase < schedule.period(); ++phase) out += phase_cluster(schedule, phase);
  return out + "}\n";
}

}  // namespace sgp::topology
