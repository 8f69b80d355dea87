#pragma once
// Generators for the standard gossip topologies. Each returns a Schedule with column-stochastic
// weights and one endpoint per rank. Every kind needs at least 2 peers.
//
// Kinds (the CLI names in quotes; i -> j means i pushes to j; indices are mod N):
//   "ring"                  directed ring: i -> i+1.
//   "bidirectional-ring"    i -> i-1 and i -> i+1.
//   "exponential"           static: i -> i + 2^j for every j in 0..ceil(log2 N)-1.
//   "one-peer-exponential"  time-varying (SGP's default), period ceil(log2 N): at iteration k,
//                           i -> i + 2^(k mod period).
//   "torus"                 2-D torus R x C with R the largest divisor of N not above sqrt(N)
//                           (rank = r*C + c); pushes to its 4 grid neighbours (fewer when a side
//                           is 2). N must not be prime (R >= 2).
//   "hypercube"             N = 2^d: i -> i xor 2^j for j in 0..d-1.
//   "complete"              i -> every other rank.
//   "random-regular"        random directed graph, every rank has out- and in-degree k
//                           (default ceil(log2 N), at most N-1), no self loops, strongly
//                           connected; reproducible from the seed.
//   "hyper-hypercube"       time-varying, N with every prime factor <= k+1 (--degree k, default 1):
//                           exact average after one period, at most k neighbours per round
//                           (sgp/topology/finite_time.hpp).
//   "base"                  the Base-(k+1) graph: the same for every N, period at most
//                           2 log_(k+1)(N) + 2 (sgp/topology/finite_time.hpp).
//   "one-peer-random-shift" time-varying, period kRandomShiftPeriod: in round t, i -> i + a_t with
//                           weight 1/2, a_t drawn from 1..N-1 by the seed (the same file, hence
//                           the same shifts, on every peer).
//   "star"                  bidirectional star around rank 0: 0 -> every leaf, leaf -> 0. (A
//                           one-way star is never strongly connected, so push-sum could not reach
//                           consensus on it; we only generate the two-way one.)
// Weights: uniform over out-degree + 1 (hyper-hypercube and base: their own, which make them exact)
// (p_ii = p_ji = 1/(d_i + 1)); with a self weight a, each rank keeps a and spreads 1 - a evenly
// over its out-neighbours. Endpoints: round robin over the hosts (rank r lives on host r % H) or in
// blocks (Slurm's default: the first N % H hosts get ceil(N / H) consecutive ranks, the others
// floor(N / H)); rank r gets tcp://HOST:(base_port + the number of lower ranks on the same host). A
// host may be listed more than once, so that a list of one host per rank (a Slurm job's task
// placement) puts each rank exactly where it runs.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sgp/topology/schedule.hpp"

namespace sgp::topology {

enum class TopologyKind {
  kRing,
  kBidirectionalRing,
  kExponential,
  kOnePeerExponential,
  kTorus,
  kHypercube,
  kComplete,
  kRandomRegular,
  kStar,
  kHyperHypercube,
  kBase,
  kOnePeerRandomShift,
};

// Every kind, in the order above.
const std::vector<TopologyKind>& all_topology_kinds();
// The CLI name, e.g. "one-peer-exponential".
std::string_view topology_kind_name(TopologyKind kind);
// The inverse of topology_kind_name; throws InputError naming the valid names.
TopologyKind parse_topology_kind(std::string_view name);
// One line per kind: its name and what it generates (for --help).
std::string topology_kinds_help();

enum class Placement { round_robin, block };
// "round-robin" / "block"; parse_placement throws InputError naming the valid names.
std::string_view placement_name(Placement placement);
Placement parse_placement(std::string_view name);

struct GeneratorOptions {
  int num_peers = 0;
  // The mixing rate a in (0, 1); unset: uniform over out-degree + 1.
  std::optional<double> self_weight;
  // random-regular: out-degree k in 1..N-1; 0 means ceil(log2 N) (at most N-1).
  // hyper-hypercube, base: at most k neighbours per round, k >= 1; 0 means 1.
  int degree = 0;
  // random-regular and one-peer-random-shift only.
  std::uint64_t seed = 0;
  std::vector<std::string> hosts = {"127.0.0.1"};
  int base_port = 29500;
  Placement placement = Placement::round_robin;
};

// Throws InputError when the options do not fit the kind (N too small, N not a power of two for
// a hypercube, a prime N for a torus, a prime factor of N above k+1 for a hyper-hypercube, self
// weight outside (0, 1) or given to an exact kind, ports beyond 65535, ...).
// Cheap: checks without building the graph (a sweep checks every kind against every N).
void check_topology_fits(TopologyKind kind, const GeneratorOptions& options);

// Throws as check_topology_fits does.
Schedule generate_topology(TopologyKind kind, const GeneratorOptions& options);

// The `sgp topology generate ...` command line that reproduces this schedule (written as a
// comment at the top of generated files).
std::string generator_command_line(TopologyKind kind, const GeneratorOptions& options);

// The rounds of one-peer-random-shift: its shifts are drawn afresh for this many rounds, then
// repeated (a topology file has a finite period).
inline constexpr int kRandomShiftPeriod = 64;

// tcp://HOST:PORT per rank, placed on `hosts` as above (hosts may repeat); base_port 0 gives
// every rank port 0, for `sgp launch` to pick free ports. Throws InputError on an empty host list
// or an empty host name, or a port outside 1..65535.
std::vector<std::string> place_endpoints(int num_peers, const std::vector<std::string>& hosts,
                                         int base_port,
                                         Placement placement = Placement::round_robin);

// The same endpoints on new ports: each rank keeps its host and gets base_port + the number of
// lower ranks on that host (sgp launch --base-port). InputError as above.
std::vector<std::string> readdress_ports(const std::vector<std::string>& endpoints, int base_port);

// `num_peers` endpoints tcp://127.0.0.1:PORT on distinct TCP ports that are free now (all held
// open until all are known, then released for the peers to bind): for runs and tests on this host
// that must not collide with fixed ports. The ports are drawn at random from 10000 up to the
// kernel's ephemeral range, where other processes' outgoing connections would not take them
// before the peers bind; the OS's pick is the fallback. Throws IoError when no port is free.
std::vector<std::string> free_local_endpoints(int num_peers);

// A hosts file: one host name or address per line; blank lines and '#' comments are skipped.
// Throws InputError (file and line) on an unreadable file, a line with spaces inside the host,
// or a file with no host.
std::vector<std::string> read_hosts_file(const std::filesystem::path& path);

}  // namespace sgp::topology
