#pragma once
// How long a run of given settings trains, in iterations: the same on every peer and in the
// consensus monitor, which accepts snapshots of the evaluation iterations only.
#include <cstddef>
#include <cstdint>

#include "sgp/config/train_config.hpp"

namespace sgp::config {

// Iterations per epoch when `num_peers` peers each take `batch_size` samples per iteration:
// the same on every peer, so that synchronous gossip rounds line up.
std::int64_t iterations_per_epoch(std::size_t train_size, int num_peers, int batch_size);
// The iterations a run of these settings trains (--epochs, capped by --max-iterations).
std::int64_t total_iterations(const TrainConfig& config, std::int64_t per_epoch);
// Iterations between evaluations (--eval-every epochs, at least 1); the last iteration is
// evaluated too. The monitor accepts snapshots of these iterations only.
std::int64_t evaluation_interval(const TrainConfig& config, std::int64_t per_epoch);

}  // namespace sgp::config
