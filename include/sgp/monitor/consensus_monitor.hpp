#pragma once
// The passive consensus monitor. At evaluation points every peer hands its de-biased parameters
// z_i to the monitor (best effort: gossip::SnapshotPublisher never blocks, drops when the monitor
// is slow or gone). When the monitor holds all N snapshots of an iteration it computes, exactly:
//   zbar = (1/N) sum_i z_i
//   relative consensus error = mean_i ||z_i - zbar||^2 / ||zbar||^2
//   test accuracy and loss of zbar (the average model)
// and appends one record to monitor.jsonl. Training never waits for it, and a monitor that dies
// never stops training.
//
// Snapshots use the gossip wire format (gossip/wire_format.hpp) with sender = rank,
// round = iteration, weight = coefficient = 1, so every field is validated the same way.
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sgp/compute/backend.hpp"
#include "sgp/config/algorithm.hpp"
#include "sgp/config/train_config.hpp"
#include "sgp/data/dataset.hpp"
#include "sgp/gossip/wire_format.hpp"
#include "sgp/run/summaries.hpp"
#include "sgp/transport/message.hpp"

namespace sgp::transport {
class SnapshotReceiver;
}  // namespace sgp::transport
namespace sgp::model {
class Evaluator;
}

namespace sgp::monitor {

struct MonitorRecord {
  std::int64_t iteration = 0;
  double consensus_error = 0.0;
  std::optional<double> average_model_accuracy;  // none from a consensus-only monitor
  std::optional<double> average_model_loss;
  int peers = 0;                // snapshots averaged: fewer than N when peers were gone
  double sum_of_weights = 0.0;  // their push-sum weights: N when no mass is lost or in flight
  bool mass_drift = false;      // conserved mass only: all N peers, and the sum is not N
};

// What the peers' push-sum weights promise. conserved: synchronous mixing (sgp, dpsgd, exact,
// local), whose weights sum to N after every round, so a complete record whose sum is off by
// more than 1e-6 N is flagged (mass_drift: a lost or forged message, a bug). in_flight: osgp,
// whose snapshots leave out what is on the wire, and asgp, whose restarts from z set w = 1 and
// whose messages are always under way: the sum is reported, nothing is promised (asgp's weights
// are only checked finite, since they may exceed N).
enum class MassModel { conserved, in_flight };
MassModel mass_model_of(config::Algorithm algo);

// The iterations at which a run's peers evaluate and hand snapshots over (peer::Trainer): every
// `every` iterations, and the last one, `total`.
struct EvaluationPoints {
  std::int64_t every = 1;
  std::int64_t total = 0;
  bool contains(std::int64_t iteration) const {
    return iteration == total || (iteration > 0 && iteration < total && iteration % every == 0);
  }
};

// The evaluation points of a run of these settings among `num_peers` peers (peer::Trainer's
// rule; the epoch's length from the training set's size). InputError when the data is missing.
EvaluationPoints evaluation_points(const config::TrainConfig& config, int num_peers);

class ConsensusMonitor {
 public:
  // model: the peers' --model; data_dir: where the Fashion-MNIST test set the average
  // model is evaluated on lives (as for the peers; empty: the default); log: where records are
  // appended (monitor.jsonl; its first record first drops the file's records of that iteration
  // and later, which a resumed run records again). Evaluates on the CPU, so it never takes a GPU
  // from the peers.
  ConsensusMonitor(const std::string& model, const std::string& data_dir, int num_peers,
                   std::filesystem::path log, MassModel mass = MassModel::conserved);
  // Consensus only, for peers whose model is not sgp's (sgp launch -- COMMAND: a PyTorch
  // program): the parameter count is taken from the first valid snapshot, and records carry no
  // average-model accuracy (the program evaluates the average model itself, sgp/torch.py), nor
  // is model-average.bin written.
  ConsensusMonitor(int num_peers, std::filesystem::path log, MassModel mass = MassModel::conserved);
  ~ConsensusMonitor();

  // From now on, refuses (and counts) every snapshot of an iteration that is not one of
  // `points`: nobody, even with a valid key, can add a record the run never evaluates.
  void accept_only(EvaluationPoints points) { points_ = points; }

  // Validates and stores one snapshot; returns the record when it completed an iteration.
  // Invalid snapshots are counted and logged, never applied.
  std::optional<MonitorRecord> add(transport::Message message);

  // Records every iteration still waiting for snapshots with the ones it has (at the end of a
  // run where peers died or left).
  void flush();
  const std::vector<MonitorRecord>& records() const { return records_; }
  std::uint64_t rejected() const { return rejected_; }
  // Valid snapshots given up: their iteration could no longer complete.
  std::uint64_t dropped() const { return dropped_; }
  run::MonitorSummary summary() const;
  // Writes the average model of the last record (the mean of the peers' z) to `path`; nothing
  // when there is no record.
  void write_average_model(const std::filesystem::path& path) const;

 private:
  MonitorRecord complete(std::int64_t iteration);
  bool far_ahead(std::int64_t iteration) const;  // beyond any genuine next evaluation
  // A snapshot refused for its size or sender: when its header says it comes from peers with
  // another model or more ranks, logs (once) what does not match and how to fix it.
  void explain_mismatch(const gossip::WireHeader& header, gossip::RejectCause cause);

  std::unique_ptr<compute::Backend> backend_;
  data::Dataset test_;
  std::unique_ptr<model::Evaluator> evaluator_;
  std::size_t parameter_count_;  // 0 until the first snapshot for a consensus-only monitor
  int num_peers_;
  MassModel mass_;
  std::uint64_t drift_records_ = 0;
  std::filesystem::path log_;
  std::map<std::int64_t, std::map<int, std::vector<float>>> pending_;  // iteration -> rank -> z
  std::map<std::int64_t, std::map<int, double>> weights_;              // iteration -> rank -> w
  std::vector<MonitorRecord> records_;
  std::uint64_t rejected_ = 0;
  std::uint64_t dropped_ = 0;
  std::string model_;
  std::optional<std::string> mismatch_;
  std::optional<EvaluationPoints> points_;
  std::uint64_t off_schedule_ = 0;  // snapshots of iterations that are not evaluation points
  std::vector<float> average_;      // of the last record
};

// The monitor of a run of these settings: evaluating the peers' --model, or consensus only
// (`consensus_only`: the peers are a program's, sgp launch -- COMMAND).
std::unique_ptr<ConsensusMonitor> make_monitor(const config::TrainConfig& config, int num_peers,
                                               std::filesystem::path log, bool consensus_only);

// Receives snapshots into `monitor` until `stop` is set, then drains what is still queued
// (until nothing arrives for `drain`) and returns. Errors are logged, never thrown: a monitor
// problem must not stop anything else. With until_iteration > 0 it also returns once that
// iteration's record is complete.
void serve_monitor(ConsensusMonitor& monitor, transport::SnapshotReceiver& receiver,
                   const std::atomic<bool>& stop, std::int64_t until_iteration = 0,
                   std::chrono::milliseconds drain = std::chrono::milliseconds(1000));

// Consensus error of host vectors, exactly as the monitor computes it (for tests and tools).
double relative_consensus_error(const std::vector<std::vector<float>>& z);

}  // namespace sgp::monitor
