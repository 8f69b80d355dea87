#pragma once
// The training loop of one peer: data -> model -> optimizer, with metrics and progress.
#include <cstdint>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "sgp/compute/backend.hpp"
#include "sgp/data/dataset.hpp"
#include "sgp/peer/train_config.hpp"

namespace sgp::peer {

class RunDirectory;

// Iterations per epoch when `num_peers` peers each take `batch_size` samples per iteration:
// the same on every peer, so that synchronous gossip rounds line up.
std::int64_t iterations_per_epoch(std::size_t train_size, int num_peers, int batch_size);

// Median and 90th percentile of `values` (copied), ignoring the first `skip` entries.
struct Percentiles {
  double median = 0.0, p90 = 0.0;
};
Percentiles percentiles(std::vector<double> values, std::size_t skip);

class Trainer {
 public:
  // Trains shard `rank` of `num_peers` of the training set (one process: rank 0 of 1).
  Trainer(const TrainConfig& config, int rank, int num_peers, compute::Backend& backend,
          const data::Dataset& train, const data::Dataset& test, RunDirectory& run);
  ~Trainer();

  // Runs to the end; returns the summary that was also written to summary.json.
  nlohmann::json run();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace sgp::peer
