#pragma once
// The gossip engine's settings of one peer, from its training settings.
#include "sgp/compute/backend.hpp"
#include "sgp/config/train_config.hpp"
#include "sgp/gossip/push_sum_config.hpp"
#include "sgp/gossip/zmq_peer.hpp"

namespace sgp::topology {
class Schedule;
}

namespace sgp::config {

// The --keys / --insecure settings of a peer or launch, and the run credentials sgp launch handed
// it (config.run_credentials: the file is read by this call).
gossip::Security security(const TrainConfig& config);

// osgp's communication thread: with --comm-thread auto, only when this host has more cores than
// peers (the ranks whose endpoint has `rank`'s host); else its handoffs cost more than the
// overlap brings.
bool overlap_comm_thread(const TrainConfig& config, const topology::Schedule& schedule, int rank);

// The engine settings of peer `rank` with these settings whose parameters live on `device`.
// InputError for --compress, --robust or --sign-flip-rank off the CPU backend.
gossip::PushSumConfig push_sum_config(const TrainConfig& config, int rank,
                                      compute::DeviceKind device, bool comm_thread);

}  // namespace sgp::config
