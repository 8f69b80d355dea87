#pragma once
// What a topology promises: connectivity, diameter, degrees, traffic and the consensus rate.
//
// Mixing matrices. Phase p has the N x N matrix M_p with M_p[j][i] = p_ji (the weight i pushes to
// j; the diagonal holds the self weights). Columns sum to 1 (column-stochastic), so push-sum keeps
// sum(x) and sum(w). One period (rounds 0..P-1) applies A = M_{P-1} ... M_1 M_0.
//
// Consensus rate. With J = 1 1^T / N and x the stacked values of the peers,
//     sigma = || A (I - J) ||_2   (largest singular value of A (I - J)).
// Because 1^T A = 1^T, J A = J and A (I - J) = (I - J) A (I - J), so sigma is the norm of A
// restricted to the complement of consensus, and A^t (I - J) = (A (I - J))^t. Since the push-sum
// weights are w_t = A^t 1 and x_t = A^t x_0, the deviation of the numerators from the exact
// average times the weights obeys
//     || x_t - mean(x_0) w_t ||_2 <= sigma^t || x_0 - mean(x_0) 1 ||_2   (t whole periods),
// so sigma is the guaranteed factor by which the distance to consensus shrinks per period.
// For a doubly stochastic A it is the second largest singular value of A. Closed forms: complete
// graph with uniform weights: A = J, sigma = 0; directed ring with self weight 1/2:
// sigma = |1/2 + 1/2 e^(2 pi i / N)| = cos(pi / N); one-peer exponential with N = 2^d and self
// weight 1/2: A = J after d rounds, sigma = 0.
// Predicted rounds to shrink the distance by `tolerance` (1e-6): P * ceil(ln(tol) / ln(sigma))
// when 0 < sigma < 1, P when sigma = 0, none when sigma >= 1.
// The asymptotic rate rho = spectral radius of A (I - J) (= the largest |eigenvalue| of A other
// than the Perron eigenvalue 1 when the union is strongly connected) is also given:
// rho <= sigma, and the distance shrinks like rho^t in the long run.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sgp/topology/matrix.hpp"
#include "sgp/topology/schedule.hpp"

namespace sgp::topology {

// M_p as above (phase taken mod period).
Matrix mixing_matrix(const Schedule& schedule, int phase);
// A = M_{P-1} ... M_0.
Matrix period_product(const Schedule& schedule);

// Whether the period's product A averages exactly: every entry of A - 11^T/N within
// kExactTolerance of 0, relative to the entries 1/N. Then push-sum holds the exact mean after
// one period, whatever the start.
inline constexpr double kExactTolerance = 1e-12;
bool averages_exactly(const Matrix& period_product);
// The rounds after which the schedule averages exactly (its period), or nullopt when it does not
// or when it has more than kMaxSpectralPeers peers (the product is dense work).
std::optional<int> exact_average_rounds(const Schedule& schedule);

// The number of strongly connected components of the union of the phases' graphs (Boost
// strong_components); 1 means every peer's value can reach every other peer.
int union_strong_components(const Schedule& schedule);

// InputError "<source>: not strongly connected ..." unless it is (a single peer is): push-sum
// cannot reach the average, and a peer nobody pushes to would run alone to the end.
void require_strongly_connected(const Schedule& schedule, const std::string& source);
// The same components as groups of ranks: each group ascending, groups ordered by their first rank.
std::vector<std::vector<int>> union_components(const Schedule& schedule);
// The same for the graph whose rank i pushes to out[i] (any weights, e.g. a file still with
// problems).
std::vector<std::vector<int>> strong_components_of(const std::vector<std::vector<int>>& out);
// "the union of the graphs over one period is not strongly connected, so consensus is
// impossible; its K strongly connected components are: {0, 1} {2, 3}".
std::string not_strongly_connected_text(const std::vector<std::vector<int>>& components);
// Longest shortest path (hops) in the union graph, or nullopt when it is not strongly connected.
std::optional<int> union_diameter(const Schedule& schedule);

// Bytes of one push-sum message in the gossip wire format (sgp/gossip/wire_format.hpp): 4 bytes
// per float32 parameter, sent in chunks of max(262144, ceil(P / 256)) parameters, each with an
// 80-byte header (round, push-sum weight, coefficient, chunk, hashes, ...). ZeroMQ/TCP framing
// is not counted. A test keeps these numbers in step with gossip::Chunking and its default.
inline constexpr std::int64_t kMessageHeaderBytes = 80;
inline constexpr std::int64_t kChunkParameters = 262144;
inline constexpr std::int64_t kMaxChunks = 256;
std::int64_t message_chunks(std::int64_t parameter_count);
std::int64_t message_bytes(std::int64_t parameter_count);

struct DegreeRange {
  int min = 0;
  int max = 0;
  double mean = 0.0;
};

struct TopologyReport {
  int num_peers = 0;
  int period = 0;
  std::vector<DegreeRange> out_degree;  // per phase (self-edges not counted)
  std::vector<DegreeRange> in_degree;   // per phase
  DegreeRange union_out_degree;         // distinct peers a rank ever pushes to
  DegreeRange union_in_degree;
  int strong_components = 0;
  std::optional<int> diameter;
  std::int64_t parameter_count = 0;
  double mean_bytes_per_round = 0.0;     // per peer, averaged over peers and phases
  std::int64_t max_bytes_per_round = 0;  // the busiest peer in the busiest phase
  // sigma and rho per period; nullopt above kMaxSpectralPeers peers. Above kDenseSpectralPeers
  // sigma is iterative (iterative_rate.hpp) and rho is not computed.
  std::optional<double> consensus_rate;
  std::optional<double> asymptotic_rate;
  double rate_seconds = 0.0;  // the time sigma and rho took
  double tolerance = 1e-6;
  std::optional<std::int64_t> predicted_rounds;  // from sigma; nullopt when sigma >= 1 or unknown
  std::optional<int> exact_after_rounds;         // exact_average_rounds
};

// Above this many peers analyze_topology skips sigma, rho and the predicted rounds.
inline constexpr int kMaxSpectralPeers = 1024;
// Up to this many peers sigma and rho come from the dense product (exact, O(P N^3): 20+ s at
// 1024 peers); above, sigma comes from Lanczos on vectors (iterative_rate.hpp) and rho is left out.
inline constexpr int kDenseSpectralPeers = 256;

TopologyReport analyze_topology(const Schedule& schedule, std::int64_t parameter_count,
                                double tolerance = 1e-6);
// Human-readable text of a report, including the formulas used.
std::string format_report(const TopologyReport& report);

}  // namespace sgp::topology
