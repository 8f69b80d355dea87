#pragma once
// Where peers resume when each sees only its own checkpoints (several hosts, no shared
// filesystem): before training, every peer floods the checkpoint iterations it knows of (its
// own, then what it heard) to its out-neighbours of every phase, for num_peers - 1 exchange
// rounds. The union of the phases is strongly connected, so afterwards every peer knows every
// rank's list and picks the same iteration: the newest that every rank has.
//
// Offers are control messages (gossip/control_message.hpp, kind resume_offer) with the lists as
// payload: per rank known, i32 rank | u32 count | count x i64 iteration, little-endian. Other
// messages that arrive meanwhile (gossip of a peer that already agreed) are put back for the
// engine.
#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "sgp/transport/replay_transport.hpp"

namespace sgp::topology {
class Schedule;
}

namespace sgp::peer {

// The newest iteration in every one of `per_rank` (nothing when all are empty); InputError
// naming what each rank has when they share none.
std::optional<std::int64_t> newest_common_iteration(
    const std::vector<std::vector<std::int64_t>>& per_rank);

// Exchanges `mine` (this rank's checkpoint iterations) with the other peers of `schedule` and
// returns newest_common_iteration of all of them. IoError naming the ranks whose offer did not
// come within `timeout` (per exchange round) or was malformed.
std::optional<std::int64_t> agree_resume_iteration(transport::ReplayTransport& transport,
                                                   const topology::Schedule& schedule, int rank,
                                                   std::vector<std::int64_t> mine,
                                                   std::chrono::milliseconds timeout);

}  // namespace sgp::peer
