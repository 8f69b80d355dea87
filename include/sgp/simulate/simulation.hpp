#pragma once
// `sgp simulate`: N push-sum peers in one process, round by round, on a few threads (no thread
// or socket per peer), with the topology's Schedule and the gossip module's mixing arithmetic:
//   sync  (SGP): SyncPopulation, float32, lossless, exactly PushSumEngine's rounds;
//   async (asgp): AsyncPopulation, double, running sums on or off, seeded per-link loss,
//                 duplication and delay (in rounds).
// On the quadratic workload the peers step between mixings with the optimizer.hpp rules: plain,
// gradient tracking (gt on sync, agt on async: the tracker mixed with x as one row), local or
// quasi-global momentum, and (sync) periodic global averaging with optional slow momentum.
// Each logged round yields a RoundRecord; the run ends with the measured per-period contraction
// of the distance to consensus, to set against topology::analyze_topology's sigma and rho.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sgp/compress/compressor.hpp"
#include "sgp/simulate/async_population.hpp"
#include "sgp/simulate/link_faults.hpp"
#include "sgp/simulate/optimizer.hpp"
#include "sgp/simulate/peer_changes.hpp"
#include "sgp/simulate/workload.hpp"
#include "sgp/topology/schedule.hpp"

namespace sgp::simulate {

// How the peers mix: in lockstep rounds (sgp, gt) or asynchronously (asgp, agt).
enum class Mixing { sync, async };

struct SimulationOptions {
  std::size_t dim = 1000;
  std::int64_t rounds = 100;
  Mixing mode = Mixing::sync;
  bool running_sums = true;  // async only
  LinkFaults faults;         // async only
  Workload workload = Workload::consensus;
  double lr = 0.1;             // quadratic: step size
  double noise = 0.0;          // quadratic: gradient noise (standard deviation per coordinate)
  double spread = 1.0;         // quadratic: heterogeneity of the peers' own optima
  OptimizerOptions optimizer;  // quadratic: tracking, momentum, global averaging (optimizer.hpp)
  std::uint64_t seed = 0;
  int threads = 2;
  std::int64_t log_every = 1;       // a RoundRecord every this many rounds (and after the last)
  std::vector<PeerChange> changes;  // failures and joins (peer_changes.hpp)
  // sgp on the consensus workload: compressed gossip with public copies
  // (compressed_population.hpp), consensus step gamma (0: default_consensus_step).
  std::optional<compress::Compressor> compressor;
  double consensus_step = 0.0;
};

// After `round` rounds (0: the initial state) and the membership changes of that round. Over
// the live peers: z_i = x_i / w_i, zbar = mean_i z_i, t = the target: the exact mean m
// (consensus; after a failure, the mean of the survivors' z then) or the optimum theta* (of the
// live peers' f_i, quadratic).
struct RoundRecord {
  std::int64_t round = 0;
  int live = 0;                  // peers taking part
  double sum_of_weights = 0.0;   // of the live peers
  double consensus_error = 0.0;  // mean_i ||z_i - zbar||^2 / ||zbar||^2 (as monitor.jsonl)
  double target_error = 0.0;     // mean_i ||z_i - t||^2 / ||t||^2
  double deviation_norm = 0.0;   // ||x - t w||_2 over all peers (topology/analysis.hpp's norm)
  std::optional<double> optimality_gap;  // quadratic: f(zbar) - f*
  std::optional<double> mean_peer_gap;   // quadratic: mean_i f(z_i) - f*
  // sync: payload bytes sent by all peers in the round that ended here, and since round 0 (the
  // encoded payloads with --compress, else 4 bytes a value per edge; headers not counted).
  std::optional<std::uint64_t> bytes_sent;
  std::optional<std::uint64_t> total_bytes_sent;
};

// Per-period contraction of deviation_norm, (e(t1) / e(t0))^(P / (t1 - t0)), fitted over the
// second half of the rounds before it fell below `floor` times its start (float32 rounding, or
// double's, stops the decay there). Whole periods only; after the last membership change.
struct ContractionFit {
  std::optional<double> per_period;
  std::int64_t from_round = 0;
  std::int64_t to_round = 0;
  bool floor_reached = false;  // the fit is the decay down to the rounding floor
};

struct SimulationResult {
  RoundRecord final_record;
  std::vector<double> target;  // t at the end
  ContractionFit contraction;
  MessageCounts messages;  // async only
  // The round at which z stopped being finite (a diverging optimizer); the run stopped there.
  std::optional<std::int64_t> diverged_at;
  double wall_time_s = 0.0;   // the rounds (and their measurements), not the set-up
  double setup_time_s = 0.0;  // initial vectors, edges
  std::size_t state_bytes = 0;
};

// The mixing algorithm these options run, as `--algo` names it: sgp (sync), asgp (async), gt
// (sync, gradient tracking) or agt (async, gradient tracking).
const char* algorithm_name(const SimulationOptions& options);

// InputError naming the flags for optimizer options that do not go together (docs/simulation.md):
// gradient tracking, momentum and global averaging need --workload quadratic; quasi-global
// momentum needs --momentum; momentum with tracking, global averaging with an asynchronous
// algorithm or with tracking, and any of them with --fail / --join are not defined; slow momentum
// needs global averaging; rules that divide by lr need lr > 0.
void require_valid_optimizer(const SimulationOptions& options);

// InputError naming the flags when --compress is given with anything but --algo sgp on the
// consensus workload without --fail / --join, or --consensus-step without --compress.
void require_valid_compression(const SimulationOptions& options);

// The consensus step gamma a run uses: options.consensus_step, or the default for its compressor
// (docs/simulation.md: what converges on the measured topologies).
double consensus_step(const SimulationOptions& options);

// Values per peer in the mixed vector: x, and a tracker after it with gradient tracking.
std::size_t row_width(const SimulationOptions& options);

// Bytes the mixing state takes (x, edges, buffers, the optimizer's) for these options.
std::size_t state_bytes(const topology::Schedule& schedule, const SimulationOptions& options);

// InputError naming the figures when the state would not fit in this machine's memory.
void require_fits_in_memory(const topology::Schedule& schedule, const SimulationOptions& options);

// Runs the simulation; on_record gets every logged round (and every round with membership
// changes) as it is measured. InputError when the state would not fit in this machine's memory,
// or for changes plan_membership refuses.
SimulationResult simulate(const topology::Schedule& schedule, const SimulationOptions& options,
                          const std::function<void(const RoundRecord&)>& on_record = {});

}  // namespace sgp::simulate
