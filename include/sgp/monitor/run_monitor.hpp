#pragma once
// A run's consensus monitor, composed once for `sgp monitor` (by hand, for multi-host runs) and
// for the monitor `sgp launch` runs itself when every peer is local: the snapshot receiver with
// its CURVE (or, for a keyless run, PLAIN) server, the ConsensusMonitor writing monitor.jsonl,
// and what it writes when it stops (model-average.bin, the summary).
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "sgp/config/train_config.hpp"
#include "sgp/gossip/zmq_peer.hpp"
#include "sgp/monitor/consensus_monitor.hpp"
#include "sgp/run/summaries.hpp"
#include "sgp/transport/plain.hpp"

namespace sgp::topology {
class Schedule;
}

namespace sgp::monitor {

class RunMonitor {
 public:
  // Listens at `bind` ("tcp://ADDRESS:PORT"; PORT * lets the OS choose, endpoint() tells): as a
  // CURVE server when the topology has keys (`security`: the monitor's key), else plain where
  // gossip::monitor_curve allows it; `plain`: a keyless local run's credentials. Records into
  // <run_dir>/monitor.jsonl. `consensus_only`: the peers are a program's, whose model is not
  // sgp's (the consensus error only). InputError for a bind the security does not allow,
  // IoError when it cannot bind.
  RunMonitor(const config::TrainConfig& config, const topology::Schedule& schedule,
             const gossip::Security& security, const std::filesystem::path& run_dir,
             const std::string& bind, bool consensus_only,
             const std::optional<transport::PlainServer>& plain = std::nullopt);
  ~RunMonitor();
  RunMonitor(const RunMonitor&) = delete;
  RunMonitor& operator=(const RunMonitor&) = delete;

  std::string endpoint() const;
  // From now on, takes the snapshots of the run's evaluation iterations only; returns them.
  // InputError when the data the epoch's length comes from is missing.
  EvaluationPoints accept_run_evaluations();
  // Records until `stop` is set or, with until_iteration > 0, that iteration's record is complete
  // (monitor::serve_monitor: errors are logged, never thrown).
  void serve(const std::atomic<bool>& stop, std::int64_t until_iteration = 0);
  // Once serve has returned: writes <run_dir>/model-average.bin and returns the summary, with
  // the connections the receiver refused.
  run::MonitorSummary finish();

 private:
  config::TrainConfig config_;
  int num_peers_;
  std::filesystem::path run_dir_;
  std::unique_ptr<ConsensusMonitor> monitor_;
  std::unique_ptr<transport::SnapshotReceiver> receiver_;
};

}  // namespace sgp::monitor
