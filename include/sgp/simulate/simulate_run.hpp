#pragma once
// The `sgp simulate` command: builds the schedule (a generated kind or a DOT file), runs the
// simulation and writes its run directory:
//   config.json     every option
//   simulate.jsonl  one RoundRecord per logged round (round, live, sum_of_weights, consensus_error,
//                   mean_error (consensus) or optimum_error + optimality_gap + mean_peer_gap
//                   (quadratic), deviation_norm; sync: bytes_sent and total_bytes_sent, the
//                   payload bytes of that round and since round 0)
//   summary.json    the last record, the measured contraction per period against the predicted
//                   sigma and rho (topology::analyze_topology, up to kMaxSpectralPeers peers),
//                   time, peak memory, message counts and membership_changes (who failed and
//                   joined when), bytes_per_round (sync)
#include <optional>
#include <string>

#include "sgp/simulate/simulation.hpp"
#include "sgp/topology/schedule.hpp"

namespace sgp::simulate {

struct SimulateCommand {
  std::string topology;  // a generator kind, or a DOT file
  int peers = 0;         // for a kind (a file fixes N itself; 0 or the same N)
  std::optional<double> self_weight;
  int degree = 0;  // random-regular
  std::uint64_t topology_seed = 0;
  SimulationOptions options;
  bool predict = true;
  std::string run_dir;  // empty: runs/simulate-<time>
  bool overwrite = false;
};

// InputError for a kind/N that does not fit, a file that cannot be read, a --peers that
// contradicts the file, or a topology that is not strongly connected.
topology::Schedule simulation_schedule(const SimulateCommand& command);

// Runs it and writes the run directory; prints where, and the final figures.
void run_simulate(const SimulateCommand& command);

}  // namespace sgp::simulate
