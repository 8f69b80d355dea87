#pragma once
// The `sgp simulate` command: builds the schedule (a generated kind or a DOT file), runs the
// simulation and writes its run directory:
//   config.json     every option (simulate_settings.hpp's table), the peers and period
//   simulate.jsonl  one RoundRecord per logged round (round, live, sum_of_weights, consensus_error,
//                   mean_error (consensus) or optimum_error + optimality_gap + mean_peer_gap
//                   (quadratic), deviation_norm; sync: bytes_sent and total_bytes_sent, the
//                   payload bytes of that round and since round 0)
//   summary.json    the last record, the measured contraction per period against the predicted
//                   sigma and rho (topology::analyze_topology, up to kMaxSpectralPeers peers),
//                   time, peak memory, message counts and membership_changes (who failed and
//                   joined when), bytes_per_round (sync)
#include "sgp/simulate/simulate_settings.hpp"
#include "sgp/simulate/simulation.hpp"
#include "sgp/topology/schedule.hpp"

namespace sgp::simulate {

struct SimulateCommand {
  SimulateSettings settings;  // as given: the topology, the run directory, config.json
  SimulationOptions options;  // what the simulation runs
};

// What sgp simulate runs for these settings. InputError naming the flags for a value or a
// combination it refuses (each option's own range is checked when it is set).
SimulateCommand simulate_command(const SimulateSettings& settings, const GivenKeys& given);

// InputError for a kind/N that does not fit, a file that cannot be read, a --peers that
// contradicts the file, or a topology that is not strongly connected.
topology::Schedule simulation_schedule(const SimulateCommand& command);

// Runs it and writes the run directory; prints where, and the final figures.
void run_simulate(const SimulateCommand& command);

}  // namespace sgp::simulate
