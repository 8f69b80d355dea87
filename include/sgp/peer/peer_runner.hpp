#pragma once
// One SGP peer process from start to end: topology file -> mixing schedule -> ZeroMQ transport
// -> data shard -> Trainer, writing peer-<rank>.jsonl and peer-<rank>-summary.json into the run
// directory (and config.json from rank 0).
#include <optional>
#include <string>

#include "sgp/gossip/zmq_peer.hpp"
#include "sgp/peer/summaries.hpp"
#include "sgp/peer/train_config.hpp"

namespace sgp::topology {
class Schedule;
}

namespace sgp::peer {

// The rank of this process: `flag` when given, else $RANK, else $SLURM_PROCID. InputError when
// none is set or one is not a number.
int resolve_rank(std::optional<int> flag);

// This peer's place among its host's peers, which picks its GPU with --device auto|cuda on a
// host with several (compute::gpu_index): $LOCAL_RANK (torchrun, Slurm wrappers) when set, else
// the number of lower ranks whose endpoint is on the same host as `rank`'s. InputError when
// $LOCAL_RANK is not a non-negative integer.
int local_peer_index(const topology::Schedule& schedule, int rank);

// The --keys / --insecure settings of a peer or launch, and the run credentials sgp launch handed
// it (config.run_credentials: the file is read by this call).
gossip::Security security(const TrainConfig& config);

// Reads config.topology (InputError naming the file and every problem in it).
topology::Schedule load_topology(const TrainConfig& config);

// Runs peer `rank` to the end; returns its summary. Rank 0 writes config.json when
// `write_config` (not when the settings came from the run's own config.json). `join`: asgp
// only, join a run in progress (a rank that died or never started) instead of starting it.
PeerSummary run_peer(const TrainConfig& config, int rank, bool write_config = true,
                     bool join = false);

}  // namespace sgp::peer
