#include "sgp/monitor/run_monitor.hpp"

#include "sgp/run/file_names.hpp"
#include "sgp/topology/schedule.hpp"
#include "sgp/transport/snapshot_channel.hpp"

namespace sgp::monitor {

RunMonitor::RunMonitor(const config::TrainConfig& config, const topology::Schedule& schedule,
                       const gossip::Security& security, const std::filesystem::path& run_dir,
                       const std::string& bind, bool consensus_only,
                       const std::optional<transport::PlainServer>& plain)
    : config_(config),
      num_peers_(schedule.num_peers()),
      run_dir_(run_dir),
      monitor_(make_monitor(config, num_peers_, run_dir / run::kMonitorLogFile, consensus_only)),
      receiver_(std::make_unique<transport::SnapshotReceiver>(
          bind, gossip::monitor_curve(schedule, security, bind), plain)) {}

RunMonitor::~RunMonitor() = default;

std::string RunMonitor::endpoint() const { return receiver_->endpoint(); }

EvaluationPoints RunMonitor::accept_run_evaluations() {
  const auto points = evaluation_points(config_, num_peers_);
  monitor_->accept_only(points);
  return points;
}

void RunMonitor::serve(const std::atomic<bool>& stop, std::int64_t until_iteration) {
  serve_monitor(*monitor_, *receiver_, stop, until_iteration);
}

run::MonitorSummary RunMonitor::finish() {
  monitor_->write_average_model(run_dir_ / run::kAverageModelFile);
  auto summary = monitor_->summary();
  summary.refused_connections = receiver_->refused_connections();
  return summary;
}

}  // namespace sgp::monitor
