#include "sgp/topology/analysis.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/strong_components.hpp>
#include <boost/graph/visitors.hpp>

#include "sgp/error.hpp"
#include "sgp/topology/iterative_rate.hpp"

namespace sgp::topology {

namespace {

using UnionGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;

UnionGraph union_graph(const Schedule& schedule) {
  UnionGraph g(schedule.num_peers());
  for (int i = 0; i < schedule.num_peers(); ++i)
    for (int j : schedule.all_out_neighbors(i)) boost::add_edge(i, j, g);
  return g;
}

DegreeRange degree_range(const std::vector<int>& degrees) {
  DegreeRange r;
  r.min = *std::min_element(degrees.begin(), degrees.end());
  r.max = *std::max_element(degrees.begin(), degrees.end());
  double sum = 0.0;
  for (int d : degrees) sum += d;
  r.mean = sum / static_cast<double>(degrees.size());
  return r;
}

std::string format_degrees(const DegreeRange& r) {
  if (r.min == r.max) return fmt::format("{}", r.min);
  return fmt::format("{}..{} (mean {:.3g})", r.min, r.max, r.mean);
}

}  // namespace

Matrix mixing_matrix(const Schedule& schedule, int phase) {
  const int n = schedule.num_peers();
  Matrix m(n);
  for (int i = 0; i < n; ++i) {
    m(i, i) = schedule.self_weight(i, phase);
    for (const Push& push : schedule.out_edges(i, phase)) m(push.peer, i) = push.weight;
  }
  return m;
}

Matrix period_product(const Schedule& schedule) {
  Matrix a = Matrix::identity(schedule.num_peers());
  for (int p = 0; p < schedule.period(); ++p) a = mixing_matrix(schedule, p) * a;
  return a;
}

bool averages_exactly(const Matrix& a) {
  const int n = a.size();
  const double mean = 1.0 / static_cast<double>(n);
  for (int row = 0; row < n; ++row)
    for (int col = 0; col < n; ++col)
      if (!(std::abs(a(row, col) - mean) <= kExactTolerance * mean)) return false;
  return true;
}

namespace {

// averages_exactly without forming A: A = J exactly when A (I - J) = 0 (sigma, from the
// iterative analysis) and A 1 = 1.
bool averages_exactly_sparse(const Schedule& schedule, double sigma) {
  if (sigma > kExactTolerance) return false;
  const auto ones = apply_period(schedule, std::vector<double>(schedule.num_peers(), 1.0));
  return std::all_of(ones.begin(), ones.end(),
                     [](double v) { return std::abs(v - 1.0) <= kExactTolerance; });
}

}  // namespace

std::optional<int> exact_average_rounds(const Schedule& schedule) {
  const int n = schedule.num_peers();
  if (n > kMaxSpectralPeers) return std::nullopt;
  const bool exact =
      n > kDenseSpectralPeers
          ? averages_exactly_sparse(schedule, iterative_consensus_rate(schedule).sigma)
          : averages_exactly(period_product(schedule));
  if (!exact) return std::nullopt;
  return schedule.period();
}

std::vector<std::vector<int>> union_components(const Schedule& schedule) {
  std::vector<std::vector<int>> out(schedule.num_peers());
  for (int i = 0; i < schedule.num_peers(); ++i) out[i] = schedule.all_out_neighbors(i);
  return strong_components_of(out);
}

std::vector<std::vector<int>> strong_components_of(const std::vector<std::vector<int>>& out) {
  UnionGraph g(out.size());
  for (std::size_t i = 0; i < out.size(); ++i)
    for (int j : out[i]) boost::add_edge(i, j, g);
  std::vector<int> component(boost::num_vertices(g));
  const int count = boost::strong_components(
      g, boost::make_iterator_property_map(component.begin(), boost::get(boost::vertex_index, g)));
  std::vector<std::vector<int>> groups(count);
  for (std::size_t rank = 0; rank < out.size(); ++rank)
    groups[component[rank]].push_back(static_cast<int>(rank));
  std::sort(groups.begin(), groups.end());
  return groups;
}

int union_strong_components(const Schedule& schedule) {
  return static_cast<int>(union_components(schedule).size());
}

std::string not_strongly_connected_text(const std::vector<std::vector<int>>& components) {
  std::string groups;
  for (const auto& c : components) groups += fmt::format(" {{{}}}", fmt::join(c, ", "));
  return fmt::format(
      "the union of the graphs over one period is not strongly connected, so consensus is "
      "impossible; its {} strongly connected components are:{}",
      components.size(), groups);
}

void require_strongly_connected(const Schedule& schedule, const std::string& source) {
  const int components = union_strong_components(schedule);
  if (schedule.num_peers() <= 1 || components == 1) return;
  throw InputError(fmt::format(
      "{}: the topology is not strongly connected ({} strongly connected components over its "
      "period), so push-sum cannot reach the average; `sgp topology check {}` says more",
      source, components, source));
}

std::optional<int> union_diameter(const Schedule& schedule) {
  const UnionGraph g = union_graph(schedule);
  const int n = schedule.num_peers();
  int diameter = 0;
  for (int source = 0; source < n; ++source) {
    std::vector<int> distance(n, -1);
    distance[source] = 0;
    boost::breadth_first_search(
        g, source,
        boost::visitor(boost::make_bfs_visitor(boost::record_distances(
            boost::make_iterator_property_map(distance.begin(), boost::get(boost::vertex_index, g)),
            boost::on_tree_edge()))));
    for (int v = 0; v < n; ++v) {
      // record_distances only writes reached vertices; the rest keep -1.
      if (v != source && distance[v] <= 0) return std::nullopt;
      diameter = std::max(diameter, distance[v]);
    }
  }
  return diameter;
}

std::int64_t message_chunks(std::int64_t parameter_count) {
  const std::int64_t per_chunk = std::max<std::int64_t>(
      {kChunkParameters, (parameter_count + kMaxChunks - 1) / kMaxChunks, 1});
  return std::max<std::int64_t>(1, (parameter_count + per_chunk - 1) / per_chunk);
}

std::int64_t message_bytes(std::int64_t parameter_count) {
  return 4 * parameter_count + message_chunks(parameter_count) * kMessageHeaderBytes;
}

namespace {

// sigma, rho and the rounds they predict.
void set_rates(TopologyReport& r, double sigma, std::optional<double> rho, double tolerance) {
  r.consensus_rate = sigma;
  r.asymptotic_rate = rho;
  // Entries of A are sums of products of weights, exact to ~1e-16; below that, sigma is 0.
  constexpr double kZero = 1e-12;
  if (sigma <= kZero) {
    r.predicted_rounds = r.period;
  } else if (sigma < 1.0) {
    const double periods = std::ceil(std::log(tolerance) / std::log(sigma));
    r.predicted_rounds = static_cast<std::int64_t>(periods) * r.period;
  }
}

}  // namespace

TopologyReport analyze_topology(const Schedule& schedule, std::int64_t parameter_count,
                                double tolerance) {
  SGP_ENFORCE(tolerance > 0.0 && tolerance < 1.0, "tolerance {} must be in (0, 1)", tolerance);
  SGP_ENFORCE(parameter_count >= 0, "parameter count {} is negative", parameter_count);
  TopologyReport r;
  const int n = schedule.num_peers();
  r.num_peers = n;
  r.period = schedule.period();
  r.parameter_count = parameter_count;
  r.tolerance = tolerance;

  double total_messages = 0.0;
  int busiest = 0;
  for (int p = 0; p < r.period; ++p) {
    std::vector<int> out(n), in(n);
    for (int i = 0; i < n; ++i) {
      out[i] = static_cast<int>(schedule.out_edges(i, p).size());
      in[i] = static_cast<int>(schedule.in_neighbors(i, p).size());
      total_messages += out[i];
    }
    r.out_degree.push_back(degree_range(out));
    r.in_degree.push_back(degree_range(in));
    busiest = std::max(busiest, r.out_degree.back().max);
  }
  std::vector<int> union_out(n), union_in(n);
  for (int i = 0; i < n; ++i) {
    union_out[i] = static_cast<int>(schedule.all_out_neighbors(i).size());
    union_in[i] = static_cast<int>(schedule.all_in_neighbors(i).size());
  }
  r.union_out_degree = degree_range(union_out);
  r.union_in_degree = degree_range(union_in);
  r.mean_bytes_per_round = total_messages / (static_cast<double>(n) * r.period) *
                           static_cast<double>(message_bytes(parameter_count));
  r.max_bytes_per_round = busiest * message_bytes(parameter_count);

  r.strong_components = union_strong_components(schedule);
  r.diameter = union_diameter(schedule);

  if (n > kMaxSpectralPeers) return r;
  if (n > kDenseSpectralPeers) {
    const auto started = std::chrono::steady_clock::now();
    const double sigma = iterative_consensus_rate(schedule).sigma;
    r.rate_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (averages_exactly_sparse(schedule, sigma)) r.exact_after_rounds = r.period;
    set_rates(r, sigma, std::nullopt, tolerance);
    return r;
  }
  const auto started = std::chrono::steady_clock::now();
  // B = A (I - J), J = 1 1^T / N: subtract each row's mean from that row of A.
  Matrix b = period_product(schedule);
  if (averages_exactly(b)) r.exact_after_rounds = r.period;
  for (int row = 0; row < n; ++row) {
    double mean = 0.0;
    for (int col = 0; col < n; ++col) mean += b(row, col);
    mean /= n;
    for (int col = 0; col < n; ++col) b(row, col) -= mean;
  }
  const double sigma = b.singular_values().front();
  const double rho = std::min(b.spectral_radius(), sigma);
  r.rate_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  set_rates(r, sigma, rho, tolerance);
  return r;
}

std::string format_report(const TopologyReport& r) {
  std::string s;
  s += fmt::format("peers: {}\nperiod: {} round{}\n", r.num_peers, r.period,
                   r.period == 1 ? " (static)" : "s");
  for (int p = 0; p < r.period; ++p)
    s += fmt::format("phase {}: out-degree {}, in-degree {}\n", p, format_degrees(r.out_degree[p]),
                     format_degrees(r.in_degree[p]));
  int max_out = 0, max_in = 0;
  for (int p = 0; p < r.period; ++p) {
    max_out = std::max(max_out, r.out_degree[p].max);
    max_in = std::max(max_in, r.in_degree[p].max);
  }
  s += fmt::format("maximum degree in a round: out {}, in {}\n", max_out, max_in);
  s += fmt::format("union over a period: out-degree {}, in-degree {}\n",
                   format_degrees(r.union_out_degree), format_degrees(r.union_in_degree));
  if (r.strong_components == 1)
    s += "union strongly connected: yes\n";
  else
    s += fmt::format(
        "union strongly connected: NO ({} strongly connected components; consensus is "
        "impossible)\n",
        r.strong_components);
  s += r.diameter ? fmt::format("diameter of the union: {} hop{}\n", *r.diameter,
                                *r.diameter == 1 ? "" : "s")
                  : "diameter of the union: infinite (not strongly connected)\n";
  s += fmt::format(
      "bytes sent per peer per round for {} parameters (per message: {} B header + 4 B per "
      "float32 parameter): mean {:.0f}, max {}\n",
      r.parameter_count, kMessageHeaderBytes, r.mean_bytes_per_round, r.max_bytes_per_round);
  if (!r.consensus_rate) {
    s += fmt::format(
        "consensus rate: not computed (more than {} peers; the dense analysis is O(N^3))\n",
        kMaxSpectralPeers);
    return s;
  }
  s += fmt::format(
      "consensus rate per period: sigma = ||A (I - 11^T/N)||_2 = {:.6g}\n"
      "  (A = M_{{P-1}} ... M_0, M_p[j][i] = weight i pushes to j; after t periods "
      "||x - mean(x0) w|| <= sigma^t ||x0 - mean(x0) 1||)\n",
      *r.consensus_rate);
  if (r.asymptotic_rate) {
    s += fmt::format(
        "asymptotic rate per period: rho = spectral radius of A (I - 11^T/N) = {:.6g}\n",
        *r.asymptotic_rate);
  } else {
    s += fmt::format(
        "asymptotic rate per period: not computed (more than {} peers: sigma by Lanczos on "
        "(A (I - 11^T/N))^T A (I - 11^T/N), without forming A)\n",
        kDenseSpectralPeers);
  }
  s += fmt::format("rate computed in {:.3f} s\n", r.rate_seconds);
  if (r.exact_after_rounds)
    s += fmt::format(
        "exact average after {} rounds (the product over one period is 11^T/N to {:g} "
        "relative)\n",
        *r.exact_after_rounds, kExactTolerance);
  if (r.predicted_rounds)
    s += fmt::format(
        "predicted rounds to shrink the distance to consensus by {:g}: {} "
        "(= P * ceil(ln {:g} / ln sigma), P when sigma = 0)\n",
        r.tolerance, *r.predicted_rounds, r.tolerance);
  else
    s += fmt::format(
        "predicted rounds to shrink the distance to consensus by {:g}: none "
        "(sigma >= 1: no guaranteed shrink per period)\n",
        r.tolerance);
  return s;
}

}  // namespace sgp::topology
