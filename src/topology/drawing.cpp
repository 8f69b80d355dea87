#include "sgp/topology/drawing.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>

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

// Each phase's peers sit on a circle of their own, rank 0 at the top and the ranks clockwise, at
// positions pinned whatever the edges (Graphviz neato): a ring drawn this way shows its
// direction, and a reversed ring looks reversed (dot's layered layout reordered the nodes).
double circle_radius(int peers) { return std::max(1.2, 0.3 * peers); }  // inches

std::string pinned(double x, double y) { return fmt::format("pos=\"{:.3f},{:.3f}!\"", x, y); }

std::string phase_cluster(const Schedule& s, int phase) {
  const double radius = circle_radius(s.num_peers());
  const double centre = phase * (2 * radius + 1.5);
  const auto colour = kPhaseColours[phase % kPhaseColours.size()];
  const std::string label = s.period() == 1
                                ? "every iteration"
                                : fmt::format("phase {} (k % {} == {})", phase, s.period(), phase);
  std::string out = fmt::format(
      "  subgraph cluster_phase{} {{\n    label=\"{}\";\n    color=\"{}\";\n    "
      "fontcolor=\"{}\";\n",
      phase, label, colour, colour);
  // An invisible point above the circle leaves room for the phase's title.
  out += fmt::format("    p{}_title [shape=point, style=invis, {}];\n", phase,
                     pinned(centre, radius + 0.9));
  for (int rank = 0; rank < s.num_peers(); ++rank) {
    const double angle = std::numbers::pi / 2 - 2 * std::numbers::pi * rank / s.num_peers();
    out += fmt::format("    p{}_{} [label=\"{}\\nkeeps {}\", {}];\n", phase, rank, rank,
                       weight(s.self_weight(rank, phase)),
                       pinned(centre + radius * std::cos(angle), radius * std::sin(angle)));
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
      "digraph drawing {{\n  layout=neato;\n  splines=curved;\n  label=\"{}\";\n  labelloc=t;\n"
      "  fontsize=12;\n"
      "  node [shape=circle, fontsize=10, margin=0.02];\n  edge [fontsize=9];\n",
      heading);
  for (int phase = 0; phase < schedule.period(); ++phase) out += phase_cluster(schedule, phase);
  return out + "}\n";
}

}  // namespace sgp::topology
