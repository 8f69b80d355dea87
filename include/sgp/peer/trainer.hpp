#pragma once
// The training loop of one peer (Assran et al. 2019, Algorithm 1): for each iteration k,
//   z = x / w;  g = stochastic gradient at z;  x = optimizer step of x with g;
//   then a push-sum round (every H iterations) that mixes (x, w) with the neighbours.
// With no communication (local / `sgp train`) w stays 1 and z = x.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "sgp/compute/backend.hpp"
#include "sgp/config/train_config.hpp"
#include "sgp/data/dataset.hpp"
#include "sgp/gossip/push_sum_config.hpp"
#include "sgp/run/model_file.hpp"
#include "sgp/run/summaries.hpp"

namespace sgp::topology {
class Schedule;
}
namespace sgp::transport {
class Transport;
}

namespace sgp::run {
class RunDirectory;
}

namespace sgp::peer {

// What a peer needs to talk to the others; all null for a peer that trains alone.
struct Communication {
  const topology::Schedule* schedule = nullptr;  // the mixing schedule (see mixing_schedule)
  transport::Transport* transport = nullptr;
  // Called at evaluation points with this peer's de-biased parameters (host copy), e.g. to hand
  // them to the consensus monitor. Must not block, except briefly for the `final` one.
  // w: the push-sum weight (mass accounting in the monitor).
  std::function<void(std::int64_t iteration, bool final, const std::vector<float>& z, double w)>
      snapshot;
  // asgp: join a run in progress (sgp peer --join) instead of starting at iteration 0.
  bool join = false;
  // asgp: set (e.g. by a SIGTERM handler) to make the peer hand its mass on and stop.
  const std::atomic<bool>* leave_requested = nullptr;
};

class Trainer {
 public:
  // Trains shard `rank` of `num_peers` of the training set.
  Trainer(const config::TrainConfig& config, int rank, int num_peers, compute::Backend& backend,
          const data::Dataset& train, const data::Dataset& test, run::RunDirectory& run,
          Communication communication = {});
  ~Trainer();

  // Runs to the end (or from the newest complete checkpoint with config.resume); returns the
  // summary that was also written to the run directory.
  run::PeerSummary run();
  // The model this peer ends with: its de-biased z = x / w and the spec.
  run::ModelFile trained_model();

 private:
  struct State;
  struct Tally;
  double step(std::int64_t iteration, Tally& tally);
  // One line of peer-<rank>.jsonl after `iteration`: the training fields of the interval since
  // the last such line when `training`, the test accuracy of z when `eval`.
  void record(std::int64_t iteration, double lr, std::optional<std::int64_t> eval, bool training,
              bool last, double wall, Tally& tally);
  void add_training_fields(nlohmann::json& record, double lr, bool last, Tally& tally);
  void add_evaluation(nlohmann::json& record, std::int64_t of, bool last, Tally& tally);
  void send_snapshot(std::int64_t of, bool last, const float* z);
  run::PeerSummary summary(const Tally& tally, double wall) const;

  std::unique_ptr<State> state_;
};

}  // namespace sgp::peer
