#pragma once
// The run-level summary.json of a multi-peer run, merged from the peers' peer-<rank>-summary.json
// and the monitor's monitor-summary.json.
#include <filesystem>

#include <nlohmann/json.hpp>

namespace sgp::peer {

// Reads what is there (a missing peer summary is listed under "missing_peers") and returns:
//   peers, algo, final_average_model_accuracy, final_consensus_error (from the monitor, when it
//   saw the end), mean/min/max_peer_accuracy, median_iteration_ms (median over the peers'
//   medians), p90_iteration_ms (max over peers), bytes_sent_per_iteration (mean over peers),
//   wall_time_s (max over peers), sum_of_weights (push-sum mass; N when nothing was lost).
nlohmann::json merge_run_summary(const std::filesystem::path& run_dir, int num_peers);

}  // namespace sgp::peer
