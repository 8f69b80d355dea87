#pragma once
// What a run reports, as typed structs: each struct's JSON keys are spelled once, in its field
// list in summaries.cpp, which both writes and reads it. A field left empty (std::nullopt, an
// empty list) is left out of the file.
//   PeerSummary     peer-<rank>-summary.json (sgp train: summary.json)
//   MonitorSummary  monitor-summary.json
//   RunSummary      summary.json of a multi-peer run, merged from the two above
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sgp::run {

// An in-neighbour that a peer suspected of pushing poisoned models (gossip::NeighbourWatch), with
// the evidence when it named it.
struct SuspectedPeer {
  int rank = -1;
  int reported_by = -1;
  std::int64_t round = 0;  // the reporter's gossip round then
  double distance = 0.0;   // its typical ||z_j - z_i|| (median over the reporter's window)
  double reference = 0.0;  // the typical distance of the reporter's other in-neighbours
  double own_norm = 0.0;   // the reporter's ||z_i||
  std::string robust;      // the reporter's --robust (clip: its contributions were clipped)
};

// A rank whose process failed during the run (and, when it rejoined, when): summary.json's
// "failures", so that a run says what happened to it and when.
struct FailedPeer {
  int rank = -1;
  std::optional<std::int64_t> last_logged_iteration;  // of the process that failed
  std::optional<std::int64_t> rejoined_at_iteration;  // sgp peer --join; none: it did not
};

struct PeerSummary {
  int rank = 0;
  int peers = 1;
  std::string algo;
  // What issue 35's settings add to algo's rule, e.g. "quasi-global momentum + PGA H=8 + SlowMo
  // 0.5" (describe_update_rule); none when they add nothing.
  std::optional<std::string> update_rule;
  std::string device;
  std::string model;  // the --model value
  std::int64_t parameters = 0;
  std::string partition;                   // the --partition value
  std::vector<std::int64_t> label_counts;  // of this peer's shard, per class
  std::int64_t iterations = 0;  // of the run (under a budget: of the group, see sample_budget)
  double epochs = 0.0;
  std::int64_t samples = 0;  // this peer trained on
  // --work budget: the run's samples over all peers together, and the iterations this peer took
  // of them (a fast peer more than `iterations`, a straggler fewer).
  std::optional<std::int64_t> sample_budget;
  std::optional<std::int64_t> own_iterations;
  double final_train_loss = 0.0;
  // Fraction in [0, 1], of this peer's z = x / w, at its last evaluation; none when it never
  // evaluated (an asgp joiner admitted after the run's last iteration).
  std::optional<double> final_test_accuracy;
  std::optional<double> final_test_loss;
  double median_iteration_ms = 0.0;  // first 20 iterations skipped
  double p90_iteration_ms = 0.0;
  // The rate the peer trains at: with more peers than cores, a time-sliced peer's median is its
  // uninterrupted step, while the mean also counts the time other peers held its core.
  double mean_iteration_ms = 0.0;   // first 20 iterations skipped, evaluations excluded
  double samples_per_second = 0.0;  // training steps only, for benchmarks
  double wall_time_s = 0.0;
  // The peer process's peak resident set size (VmHWM) when it wrote its summary; none in
  // summaries written before it was reported.
  std::optional<std::int64_t> peak_rss_bytes;
  // With gossip:
  std::optional<double> weight;  // push-sum w at the end
  std::optional<double> bytes_sent_per_iteration;
  std::optional<std::uint64_t> rejected_messages;
  std::vector<SuspectedPeer> suspected_peers;          // in-neighbours it suspected
  std::optional<std::uint64_t> clipped_contributions;  // --robust clip
  std::optional<double> partner_wait_s;  // asgp: waiting for in-neighbours that keep pace
  // asgp: pushes not made (the edge's earlier ones unacknowledged, or its buffers on the wire),
  // pushes sent again unacknowledged, and rounds that kept all the mass (w was small).
  std::optional<std::uint64_t> skipped_pushes, resent_pushes, held_rounds;
  // With a ZeroMQ transport (every algorithm that communicates), what it carried:
  std::optional<std::uint64_t> shm_bytes;  // payload bytes sent through shared-memory rings
  // Bytes sent over ZeroMQ: headers, payloads and the descriptors of the rings' payloads.
  std::optional<std::uint64_t> zmq_bytes;
  std::optional<std::uint64_t> shm_inline_messages;  // to a peer of this host: its ring was full
  std::optional<std::uint64_t> shm_refused;          // descriptors refused, never read
  // With a monitor:
  std::optional<std::uint64_t> dropped_snapshots;
  // asgp: membership as this peer saw it.
  std::vector<int> excluded_peers;                  // ranks it excluded or learnt were excluded
  std::vector<std::int64_t> excluded_at_round;      // this peer's gossip round when it did, each
  std::optional<std::int64_t> joined_at_iteration;  // sgp peer --join
  // --join: the last iteration that this rank's previous process logged (it failed after it);
  // none when it had logged nothing (or never started).
  std::optional<std::int64_t> failed_after_iteration;
  std::optional<std::int64_t> left_at_iteration;  // handed its mass on and stopped early
  std::optional<bool> final_eval;  // false: --no-final-eval (no final_test_* on purpose)
};

struct MonitorSummary {
  std::int64_t evaluations = 0;  // iterations with every peer's snapshot
  std::uint64_t rejected_snapshots = 0;
  std::uint64_t off_schedule_snapshots = 0;  // of those: not of one of the run's evaluations
  std::uint64_t refused_connections = 0;     // whose key or password was not the run's
  std::uint64_t dropped_snapshots = 0;       // valid, given up: their iteration could not complete
  std::uint64_t mass_drift_records = 0;      // synchronous mixing: records whose sum of w was not N
  std::optional<std::int64_t> final_iteration;  // the last of them
  std::optional<double> final_consensus_error;  // mean_i ||z_i - zbar||^2 / ||zbar||^2
  std::optional<double> final_average_model_accuracy;
  std::optional<double> final_average_model_loss;
  std::optional<int> final_peers;              // snapshots in the last record
  std::optional<double> final_sum_of_weights;  // their push-sum weights
  // Snapshots that did not fit the monitor's settings (another model or number of peers): what
  // did not match and how to fix it, for the first of them.
  std::optional<std::string> settings_mismatch;
};

struct RunSummary {
  int peers = 0;
  std::optional<std::string> algo;
  std::optional<std::string> update_rule;  // PeerSummary::update_rule
  std::optional<std::int64_t> iterations;
  std::optional<std::string> device;
  std::vector<int> missing_peers;      // ranks whose summary is not there
  std::vector<int> failed_peers;       // ranks whose process failed (sgp launch --on-peer-failure)
                                       // and that did not finish by rejoining
  std::vector<int> rejoined_peers;     // ranks whose summary a joiner wrote (sgp peer --join)
  std::vector<int> unevaluated_peers;  // finished without an evaluation: not in the accuracies
  std::vector<FailedPeer> failures;    // failed_peers and rejoined_peers, with their iterations
  std::vector<SuspectedPeer> suspected_peers;            // every peer's, by reporter
  std::optional<std::string> monitor_settings_mismatch;  // MonitorSummary::settings_mismatch
  std::optional<double> mean_peer_accuracy, min_peer_accuracy, max_peer_accuracy;
  std::optional<double> median_iteration_ms;          // median over the peers' medians
  std::optional<double> p90_iteration_ms;             // max over the peers
  std::optional<double> mean_iteration_ms;            // median over the peers' means
  std::optional<double> bytes_sent_per_iteration;     // mean over the peers
  std::optional<double> wall_time_s;                  // max over the peers
  std::optional<std::int64_t> samples;                // trained on, summed over the peers
  std::optional<std::int64_t> sample_budget;          // --work budget: what they were to spend
  std::optional<std::int64_t> max_peak_rss_bytes;     // over the peers that report it
  std::optional<std::int64_t> median_peak_rss_bytes;  // the same
  // Sums over the peers that report them (PeerSummary's transport fields):
  std::optional<std::uint64_t> shm_bytes, zmq_bytes, shm_inline_messages, shm_refused;
  std::optional<double> sum_of_weights;  // push-sum mass: N when nothing was lost
  std::optional<std::int64_t> monitor_evaluations;
  // From the monitor, when it recorded the last iteration:
  std::optional<double> final_average_model_accuracy;
  std::optional<double> final_consensus_error;
  // Otherwise its last record:
  std::optional<std::int64_t> last_monitored_iteration;
  std::optional<double> last_average_model_accuracy;
  std::optional<double> last_consensus_error;
};

void to_json(nlohmann::json& j, const SuspectedPeer& s);
void from_json(const nlohmann::json& j, SuspectedPeer& s);
void to_json(nlohmann::json& j, const FailedPeer& s);
void from_json(const nlohmann::json& j, FailedPeer& s);
void to_json(nlohmann::json& j, const PeerSummary& s);
void from_json(const nlohmann::json& j, PeerSummary& s);
void to_json(nlohmann::json& j, const MonitorSummary& s);
void from_json(const nlohmann::json& j, MonitorSummary& s);
void to_json(nlohmann::json& j, const RunSummary& s);
void from_json(const nlohmann::json& j, RunSummary& s);

// "86.15%", or "none (it never evaluated)": for log lines.
std::string accuracy_text(const PeerSummary& s);

// Reads what is in `run_dir` (a missing or unreadable peer summary is listed in missing_peers)
// and merges it.
RunSummary merge_run_summary(const std::filesystem::path& run_dir, int num_peers);
// The same over the directories of one run's hosts (no shared filesystem), each holding some
// ranks' summaries; InputError naming two directories that hold the same file.
RunSummary merge_run_summary(const std::vector<std::filesystem::path>& run_dirs, int num_peers);

}  // namespace sgp::run
