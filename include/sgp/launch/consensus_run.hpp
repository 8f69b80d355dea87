#pragma once
// `sgp consensus`: pure push-sum average consensus over ZeroMQ, no training. Every peer starts
// from a seeded integer vector; the vectors are built so that their global mean is an integer
// vector known in advance (exact in float32), and every round each peer reports its distance to
// that mean. run_consensus_local runs every peer of the topology as a process on this host and
// then reports the consensus error per round.
//
// Definitions (written to the run directory too):
//   distance_to_mean (peer i, round k) = ||z_i - m|| / ||m||, z_i = x_i / w_i, m the exact mean;
//   consensus_error (round k) = mean_i ||z_i - m||^2 / ||m||^2 (against the exact mean, which
//   bounds the usual mean_i ||z_i - zbar||^2 / ||zbar||^2 from above when zbar = m).
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sgp/config/train_config.hpp"
#include "sgp/gossip/push_sum_config.hpp"

namespace sgp::topology {
class Schedule;
}

namespace sgp::launch {

// The training settings sgp consensus shares (sgp/config/settings.hpp): its flags, and what
// --local passes to each peer it starts.
inline constexpr std::array<std::string_view, 15> kConsensusSettings = {
    "tau",       "timeout_ms", "seed",           "device",          "run_dir",
    "overwrite", "log_level",  "keys",           "insecure",        "running_sums",
    "inject",    "compress",   "consensus_step", "local_fast_path", "acked_pushes"};

struct ConsensusOptions {
  std::string topology;
  int rounds = 50;
  gossip::Mode mode = gossip::Mode::sync;
  std::size_t dim = 1000;
  // The kConsensusSettings, as for training runs.
  config::TrainConfig shared;
};

// One peer, this process.
void run_consensus_peer(const ConsensusOptions& options, const topology::Schedule& schedule,
                        int rank);
// Every peer of the topology as a process on this host; prints the consensus error per round.
void run_consensus_local(const ConsensusOptions& options, const topology::Schedule& schedule);

}  // namespace sgp::launch
