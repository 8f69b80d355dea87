#include "sgp/run/summaries.hpp"

#include <algorithm>
#include <concepts>
#include <numeric>

#include <fmt/format.h>

#include "sgp/error.hpp"
#include "sgp/run/file_names.hpp"
#include "sgp/run/percentiles.hpp"
#include "sgp/run/run_directory.hpp"

namespace sgp::run {

namespace {

using nlohmann::json;

// Visitors over a struct's (key, field) pairs: one writes, one reads.
struct Writer {
  json& out;
  template <class T>
  void operator()(const char* key, const T& value) {
    out[key] = value;
  }
  template <class T>
  void operator()(const char* key, const std::optional<T>& value) {
    if (value) out[key] = *value;
  }
  template <class T>
  void operator()(const char* key, const std::vector<T>& value) {
    if (!value.empty()) out[key] = value;
  }
};

struct Reader {
  const json& in;
  template <class T>
  void operator()(const char* key, T& value) {
    if (in.contains(key) && !in[key].is_null()) value = in[key].get<T>();
  }
  template <class T>
  void operator()(const char* key, std::optional<T>& value) {
    if (in.contains(key) && !in[key].is_null()) value = in[key].get<T>();
  }
};

template <class S, class V>
requires std::same_as<std::remove_const_t<S>, SuspectedPeer>
void fields(S& s, V& v) {
  v("rank", s.rank);
  v("reported_by", s.reported_by);
  v("round", s.round);
  v("distance", s.distance);
  v("reference", s.reference);
  v("own_norm", s.own_norm);
  v("robust", s.robust);
}

template <class S, class V>
requires std::same_as<std::remove_const_t<S>, FailedPeer>
void fields(S& s, V& v) {
  v("rank", s.rank);
  v("last_logged_iteration", s.last_logged_iteration);
  v("rejoined_at_iteration", s.rejoined_at_iteration);
}

template <class S, class V>
requires std::same_as<std::remove_const_t<S>, PeerSummary>
void fields(S& s, V& v) {
  v("rank", s.rank);
  v("peers", s.peers);
  v("algo", s.algo);
  v("update_rule", s.update_rule);
  v("device", s.device);
  v("model", s.model);
  v("parameters", s.parameters);
  v("partition", s.partition);
  v("label_counts", s.label_counts);
  v("iterations", s.iterations);
  v("epochs", s.epochs);
  v("samples", s.samples);
  v("sample_budget", s.sample_budget);
  v("own_iterations", s.own_iterations);
  v("final_train_loss", s.final_train_loss);
  v("final_test_accuracy", s.final_test_accuracy);
  v("final_test_loss", s.final_test_loss);
  v("median_iteration_ms", s.median_iteration_ms);
  v("p90_iteration_ms", s.p90_iteration_ms);
  v("mean_iteration_ms", s.mean_iteration_ms);
  v("samples_per_second", s.samples_per_second);
  v("wall_time_s", s.wall_time_s);
  v("peak_rss_bytes", s.peak_rss_bytes);
  v("weight", s.weight);
  v("bytes_sent_per_iteration", s.bytes_sent_per_iteration);
  v("rejected_messages", s.rejected_messages);
  v("suspected_peers", s.suspected_peers);
  v("clipped_contributions", s.clipped_contributions);
  v("partner_wait_s", s.partner_wait_s);
  v("skipped_pushes", s.skipped_pushes);
  v("resent_pushes", s.resent_pushes);
  v("held_rounds", s.held_rounds);
  v("shm_bytes", s.shm_bytes);
  v("zmq_bytes", s.zmq_bytes);
  v("shm_inline_messages", s.shm_inline_messages);
  v("shm_refused", s.shm_refused);
  v("dropped_snapshots", s.dropped_snapshots);
  v("excluded_peers", s.excluded_peers);
  v("excluded_at_round", s.excluded_at_round);
  v("joined_at_iteration", s.joined_at_iteration);
  v("failed_after_iteration", s.failed_after_iteration);
  v("left_at_iteration", s.left_at_iteration);
  v("final_eval", s.final_eval);
}

template <class S, class V>
requires std::same_as<std::remove_const_t<S>, MonitorSummary>
void fields(S& s, V& v) {
  v("evaluations", s.evaluations);
  v("rejected_snapshots", s.rejected_snapshots);
  v("off_schedule_snapshots", s.off_schedule_snapshots);
  v("refused_connections", s.refused_connections);
  v("dropped_snapshots", s.dropped_snapshots);
  v("mass_drift_records", s.mass_drift_records);
  v("final_iteration", s.final_iteration);
  v("final_consensus_error", s.final_consensus_error);
  v("final_average_model_accuracy", s.final_average_model_accuracy);
  v("final_average_model_loss", s.final_average_model_loss);
  v("final_peers", s.final_peers);
  v("final_sum_of_weights", s.final_sum_of_weights);
  v("settings_mismatch", s.settings_mismatch);
}

template <class S, class V>
requires std::same_as<std::remove_const_t<S>, RunSummary>
void fields(S& s, V& v) {
  v("peers", s.peers);
  v("algo", s.algo);
  v("update_rule", s.update_rule);
  v("iterations", s.iterations);
  v("device", s.device);
  v("missing_peers", s.missing_peers);
  v("failed_peers", s.failed_peers);
  v("rejoined_peers", s.rejoined_peers);
  v("unevaluated_peers", s.unevaluated_peers);
  v("failures", s.failures);
  v("suspected_peers", s.suspected_peers);
  v("monitor_settings_mismatch", s.monitor_settings_mismatch);
  v("mean_peer_accuracy", s.mean_peer_accuracy);
  v("min_peer_accuracy", s.min_peer_accuracy);
  v("max_peer_accuracy", s.max_peer_accuracy);
  v("median_iteration_ms", s.median_iteration_ms);
  v("p90_iteration_ms", s.p90_iteration_ms);
  v("mean_iteration_ms", s.mean_iteration_ms);
  v("bytes_sent_per_iteration", s.bytes_sent_per_iteration);
  v("wall_time_s", s.wall_time_s);
  v("samples", s.samples);
  v("sample_budget", s.sample_budget);
  v("max_peak_rss_bytes", s.max_peak_rss_bytes);
  v("median_peak_rss_bytes", s.median_peak_rss_bytes);
  v("shm_bytes", s.shm_bytes);
  v("zmq_bytes", s.zmq_bytes);
  v("shm_inline_messages", s.shm_inline_messages);
  v("shm_refused", s.shm_refused);
  v("sum_of_weights", s.sum_of_weights);
  v("monitor_evaluations", s.monitor_evaluations);
  v("final_average_model_accuracy", s.final_average_model_accuracy);
  v("final_consensus_error", s.final_consensus_error);
  v("last_monitored_iteration", s.last_monitored_iteration);
  v("last_average_model_accuracy", s.last_average_model_accuracy);
  v("last_consensus_error", s.last_consensus_error);
}

template <class S>
void write_fields(json& j, const S& s) {
  j = json::object();
  Writer w{j};
  fields(s, w);
}

template <class S>
void read_fields(const json& j, S& s) {
  Reader r{j};
  fields(s, r);
}

void add_monitor(RunSummary& out, const MonitorSummary& m) {
  out.monitor_evaluations = m.evaluations;
  out.monitor_settings_mismatch = m.settings_mismatch;
  if (!m.final_iteration) return;
  if (out.iterations && *m.final_iteration == *out.iterations) {
    out.final_average_model_accuracy = m.final_average_model_accuracy;
    out.final_consensus_error = m.final_consensus_error;
  } else {
    out.last_monitored_iteration = m.final_iteration;
    out.last_average_model_accuracy = m.final_average_model_accuracy;
    out.last_consensus_error = m.final_consensus_error;
  }
}

// The peak RSS over the peers that report it: the largest and the median.
void add_peak_rss(RunSummary& out, const std::vector<PeerSummary>& peers) {
  std::vector<double> peaks;
  for (const auto& p : peers)
    if (p.peak_rss_bytes) peaks.push_back(static_cast<double>(*p.peak_rss_bytes));
  if (peaks.empty()) return;
  out.max_peak_rss_bytes = static_cast<std::int64_t>(*std::max_element(peaks.begin(), peaks.end()));
  out.median_peak_rss_bytes = static_cast<std::int64_t>(percentiles(peaks, 0).median);
}

// The transport's counters summed over the peers that report them (none: left out).
void add_traffic(RunSummary& out, const std::vector<PeerSummary>& peers) {
  const auto sum = [&](std::optional<std::uint64_t> PeerSummary::*field) {
    std::optional<std::uint64_t> total;
    for (const auto& p : peers)
      if (p.*field) total = total.value_or(0) + *(p.*field);
    return total;
  };
  out.shm_bytes = sum(&PeerSummary::shm_bytes);
  out.zmq_bytes = sum(&PeerSummary::zmq_bytes);
  out.shm_inline_messages = sum(&PeerSummary::shm_inline_messages);
  out.shm_refused = sum(&PeerSummary::shm_refused);
}

// The JSON of `name` in the one directory of `dirs` that has it; InputError naming both when two
// have it (they are not the per-host directories of one run).
std::optional<json> only_one_of(const std::vector<std::filesystem::path>& dirs,
                                std::string_view name) {
  std::optional<json> found;
  std::filesystem::path where;
  for (const auto& dir : dirs) {
    auto j = read_json_file(dir / name);
    if (!j) continue;
    if (found) {
      throw InputError(fmt::format(
          "{} and {} both hold {}: the directories of one run's hosts hold different ranks",
          where.string(), dir.string(), name));
    }
    found = std::move(j);
    where = dir;
  }
  return found;
}

}  // namespace

void to_json(json& j, const SuspectedPeer& s) { write_fields(j, s); }
void from_json(const json& j, SuspectedPeer& s) { read_fields(j, s); }
void to_json(json& j, const FailedPeer& s) { write_fields(j, s); }
void from_json(const json& j, FailedPeer& s) { read_fields(j, s); }
void to_json(json& j, const PeerSummary& s) { write_fields(j, s); }
void from_json(const json& j, PeerSummary& s) { read_fields(j, s); }
void to_json(json& j, const MonitorSummary& s) { write_fields(j, s); }
void from_json(const json& j, MonitorSummary& s) { read_fields(j, s); }
void to_json(json& j, const RunSummary& s) { write_fields(j, s); }
void from_json(const json& j, RunSummary& s) { read_fields(j, s); }

std::string accuracy_text(const PeerSummary& s) {
  if (s.final_test_accuracy) return fmt::format("{:.2f}%", 100.0 * *s.final_test_accuracy);
  return s.final_eval.value_or(true) ? "none (it never evaluated)"
                                     : "not evaluated (--no-final-eval)";
}

RunSummary merge_run_summary(const std::filesystem::path& run_dir, int num_peers) {
  return merge_run_summary(std::vector<std::filesystem::path>{run_dir}, num_peers);
}

RunSummary merge_run_summary(const std::vector<std::filesystem::path>& run_dirs, int num_peers) {
  RunSummary out;
  out.peers = num_peers;
  std::vector<PeerSummary> peers;
  for (int rank = 0; rank < num_peers; ++rank) {
    const auto found = only_one_of(run_dirs, peer_summary_file(rank));
    if (!found) {
      out.missing_peers.push_back(rank);
      continue;
    }
    peers.push_back(found->get<PeerSummary>());
  }
  if (!peers.empty()) {
    const auto n = static_cast<double>(peers.size());
    std::vector<double> accuracy, median_ms, mean_ms;
    double bytes = 0.0, weights = 0.0;
    std::int64_t samples = 0;
    for (const auto& p : peers) {
      if (p.joined_at_iteration) {
        out.rejoined_peers.push_back(p.rank);
        out.failures.push_back({p.rank, p.failed_after_iteration, p.joined_at_iteration});
      }
      if (p.final_test_accuracy) {
        accuracy.push_back(*p.final_test_accuracy);
      } else if (p.final_eval.value_or(true)) {
        out.unevaluated_peers.push_back(p.rank);
      }
      median_ms.push_back(p.median_iteration_ms);
      mean_ms.push_back(p.mean_iteration_ms);
      bytes += p.bytes_sent_per_iteration.value_or(0.0);
      weights += p.weight.value_or(1.0);
      samples += p.samples;
      out.suspected_peers.insert(out.suspected_peers.end(), p.suspected_peers.begin(),
                                 p.suspected_peers.end());
    }
    const auto& last = peers.back();
    out.algo = last.algo;
    out.update_rule = last.update_rule;
    out.iterations = last.iterations;
    out.device = last.device;
    if (!accuracy.empty()) {
      out.mean_peer_accuracy = std::accumulate(accuracy.begin(), accuracy.end(), 0.0) /
                               static_cast<double>(accuracy.size());
      out.min_peer_accuracy = *std::min_element(accuracy.begin(), accuracy.end());
      out.max_peer_accuracy = *std::max_element(accuracy.begin(), accuracy.end());
    }
    out.median_iteration_ms = percentiles(median_ms, 0).median;
    out.mean_iteration_ms = percentiles(mean_ms, 0).median;
    out.p90_iteration_ms = std::max_element(peers.begin(), peers.end(), [](auto& a, auto& b) {
                             return a.p90_iteration_ms < b.p90_iteration_ms;
                           })->p90_iteration_ms;
    out.bytes_sent_per_iteration = bytes / n;
    out.wall_time_s = std::max_element(peers.begin(), peers.end(), [](auto& a, auto& b) {
                        return a.wall_time_s < b.wall_time_s;
                      })->wall_time_s;
    out.sum_of_weights = weights;
    out.samples = samples;
    out.sample_budget = last.sample_budget;
    add_peak_rss(out, peers);
    add_traffic(out, peers);
  }
  if (const auto m = only_one_of(run_dirs, kMonitorSummaryFile)) {
    add_monitor(out, m->get<MonitorSummary>());
  }
  return out;
}

}  // namespace sgp::run
