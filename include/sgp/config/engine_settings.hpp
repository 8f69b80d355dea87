#pragma once
// The gossip engine's settings of one peer, from its training settings.
#include <optional>
#include <string_view>

#include "sgp/compute/backend.hpp"
#include "sgp/config/algorithm.hpp"
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

// The one statement of where --compress applies: to an algorithm that sends push-sum rounds of
// float32 x (the algorithm table's compressible column; a compressor also needs rounds of x
// alone: no gradient tracking, no --global-average-every), with the payloads on the CPU backend.
// InputError saying which is missing. `on_cpu`: whether the backend is the CPU's (config.device
// is the --device given, for the message), or nullopt while --device auto is unresolved.
void require_compression_applies(const TrainConfig& config, std::optional<bool> on_cpu);

// The engine settings of peer `rank` with these settings whose parameters live on `device`.
// InputError for --compress, --robust or --sign-flip-rank off the CPU backend.
gossip::PushSumConfig push_sum_config(const TrainConfig& config, int rank,
                                      compute::DeviceKind device, bool comm_thread);

}  // namespace sgp::config
