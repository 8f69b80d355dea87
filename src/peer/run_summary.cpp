#include "sgp/peer/run_summary.hpp"

#include <algorithm>
#include <fstream>
#include <vector>

#include <fmt/format.h>

#include "sgp/peer/run_directory.hpp"
#include "sgp/peer/trainer.hpp"

namespace sgp::peer {

nlohmann::json merge_run_summary(const std::filesystem::path& run_dir, int num_peers) {
  nlohmann::json out = {{"peers", num_peers}};
  std::vector<double> accuracy, median_ms, p90_ms, bytes, wall;
  double weights = 0.0;
  std::vector<int> missing;
  for (int rank = 0; rank < num_peers; ++rank) {
    const auto s = read_json_file(run_dir / fmt::format("peer-{}-summary.json", rank));
    if (!s) {
      missing.push_back(rank);
      continue;
    }
    out["algo"] = (*s)["algo"];
    out["iterations"] = (*s)["iterations"];
    out["device"] = (*s)["device"];
    accuracy.push_back((*s)["final_test_accuracy"].get<double>());
    median_ms.push_back((*s)["median_iteration_ms"].get<double>());
    p90_ms.push_back((*s)["p90_iteration_ms"].get<double>());
    wall.push_back((*s)["wall_time_s"].get<double>());
    bytes.push_back(s->value("bytes_sent_per_iteration", 0.0));
    weights += s->value("weight", 1.0);
  }
  if (!missing.empty()) out["missing_peers"] = missing;
  if (!accuracy.empty()) {
    double sum = 0.0, byte_sum = 0.0;
    for (double a : accuracy) sum += a;
    for (double b : bytes) byte_sum += b;
    out["mean_peer_accuracy"] = sum / static_cast<double>(accuracy.size());
    out["min_peer_accuracy"] = *std::min_element(accuracy.begin(), accuracy.end());
    out["max_peer_accuracy"] = *std::max_element(accuracy.begin(), accuracy.end());
    out["median_iteration_ms"] = percentiles(median_ms, 0).median;
    out["p90_iteration_ms"] = *std::max_element(p90_ms.begin(), p90_ms.end());
    out["bytes_sent_per_iteration"] = byte_sum / static_cast<double>(bytes.size());
    out["wall_time_s"] = *std::max_element(wall.begin(), wall.end());
    out["sum_of_weights"] = weights;
  }
  if (const auto m = read_json_file(run_dir / "monitor-summary.json")) {
    out["monitor_evaluations"] = (*m)["evaluations"];
    if (m->contains("final_iteration") && out.contains("iterations") &&
        (*m)["final_iteration"] == out["iterations"]) {
      out["final_average_model_accuracy"] = (*m)["final_average_model_accuracy"];
      out["final_consensus_error"] = (*m)["final_consensus_error"];
    } else if (m->contains("final_iteration")) {
      out["last_monitored_iteration"] = (*m)["final_iteration"];
      out["last_average_model_accuracy"] = (*m)["final_average_model_accuracy"];
      out["last_consensus_error"] = (*m)["final_consensus_error"];
    }
  }
  return out;
}

}  // namespace sgp::peer
