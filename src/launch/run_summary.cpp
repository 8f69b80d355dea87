#include "sgp/launch/run_summary.hpp"

#include <algorithm>
#include <optional>

#include <fmt/ranges.h>
#include <fmt/std.h>
#include <spdlog/spdlog.h>

#include "sgp/config/settings.hpp"
#include "sgp/error.hpp"
#include "sgp/run/file_names.hpp"
#include "sgp/run/run_config.hpp"
#include "sgp/run/run_directory.hpp"

namespace sgp::launch {

namespace {

std::string iteration_text(const std::optional<std::int64_t>& iteration) {
  return iteration ? fmt::format("iteration {}", *iteration) : std::string("its start");
}

// Ranks that failed (and rejoined, or not), or that finished without an evaluation (so are not
// in the accuracies).
void log_failures_and_unevaluated(const run::RunSummary& s) {
  for (const auto& f : s.failures) {
    if (f.rejoined_at_iteration) {
      spdlog::info(
          "rank {} failed after {} and rejoined at iteration {} (failures, rejoined_peers)", f.rank,
          iteration_text(f.last_logged_iteration), *f.rejoined_at_iteration);
    } else {
      spdlog::warn("rank {} failed after {} and did not rejoin (failures, failed_peers)", f.rank,
                   iteration_text(f.last_logged_iteration));
    }
  }
  if (!s.unevaluated_peers.empty()) {
    spdlog::warn(
        "ranks {} finished without evaluating (they joined after the last evaluation): left out "
        "of the peers' accuracies (unevaluated_peers)",
        fmt::join(s.unevaluated_peers, ","));
  }
}

void log_results(const run::RunSummary& s, const std::filesystem::path& dir) {
  if (s.final_average_model_accuracy && s.final_consensus_error) {
    spdlog::info("average model: test accuracy {:.2f}%, relative consensus error {:.3e}",
                 100.0 * *s.final_average_model_accuracy, *s.final_consensus_error);
  } else if (s.monitor_settings_mismatch) {
    spdlog::warn("no average model: the monitor refused the peers' snapshots: {}",
                 *s.monitor_settings_mismatch);
  } else if (!s.monitor_evaluations) {
    spdlog::warn(
        "no average model here: no monitor-summary.json in {} (yet: a monitor started by hand "
        "writes it in its --run-dir when it stops, and in a run's directory then merges "
        "summary.json itself)",
        dir);
  } else {
    spdlog::warn(
        "no average model of the last iteration: the monitor's last complete record "
        "is of iteration {} (see monitor.jsonl)",
        s.last_monitored_iteration.value_or(0));
  }
  if (!s.missing_peers.empty()) {
    spdlog::warn("no summary of ranks {} (listed in missing_peers)",
                 fmt::join(s.missing_peers, ","));
  }
  log_failures_and_unevaluated(s);
  if (s.mean_peer_accuracy && s.median_iteration_ms) {
    spdlog::info("peers: mean test accuracy {:.2f}%, median iteration {:.2f} ms",
                 100.0 * *s.mean_peer_accuracy, *s.median_iteration_ms);
  }
  if (s.sample_budget && s.samples) {
    spdlog::info("peers: {} samples trained on of a budget of {} ({:+.2f}%)", *s.samples,
                 *s.sample_budget,
                 100.0 * static_cast<double>(*s.samples - *s.sample_budget) /
                     static_cast<double>(*s.sample_budget));
  }
  if (s.max_peak_rss_bytes && s.median_peak_rss_bytes) {
    spdlog::info("peers: peak RSS {:.0f} MiB at most, {:.0f} MiB median",
                 static_cast<double>(*s.max_peak_rss_bytes) / (1 << 20),
                 static_cast<double>(*s.median_peak_rss_bytes) / (1 << 20));
  }
  spdlog::info("results in {}", dir);
}

run::RunConfig multi_peer_config(const std::filesystem::path& run_dir) {
  const auto file = run_dir / run::kRunConfigFile;
  auto config = run::read_run_config(file);
  // sgp train's summary.json is its one process's own; there is nothing to merge.
  if (config.command == "train" || config.peers < 1) {
    throw InputError(fmt::format("{}: not a multi-peer run (command '{}', peers {})", file.string(),
                                 config.command, config.peers));
  }
  return config;
}

// What differs between two runs' configurations that one run's hosts must share ("" if none).
std::string difference(const run::RunConfig& a, const run::RunConfig& b) {
  if (a.peers != b.peers) return fmt::format("peers {} and {}", a.peers, b.peers);
  if (a.command != b.command) return fmt::format("command {} and {}", a.command, b.command);
  for (const config::Setting* s : config::training_settings()) {
    if (!s->fixed_across_resume()) continue;
    if (s->get(a.settings) != s->get(b.settings)) {
      return fmt::format("{} {} and {}", s->key(), s->text(a.settings), s->text(b.settings));
    }
  }
  return "";
}

// Whether `summary` knows more than the summary in `file`: fewer missing peers, or as many and
// the monitor's results where the file has none (a rank that failed on another host never
// finishes, so no launcher sees every peer; the one that sees the most still gets its say).
bool knows_more(const run::RunSummary& summary, const std::filesystem::path& file) {
  const auto existing = run::read_json_file(file);
  if (!existing) return true;
  const auto old = existing->get<run::RunSummary>();
  if (summary.missing_peers.size() != old.missing_peers.size())
    return summary.missing_peers.size() < old.missing_peers.size();
  return summary.monitor_evaluations && !old.monitor_evaluations;
}

// The failed ranks that did not finish after all: one whose process failed and that then rejoined
// (sgp peer --join) and wrote its summary is in rejoined_peers instead.
std::vector<int> still_failed(const std::vector<int>& failed, const run::RunSummary& s) {
  std::vector<int> out;
  for (int rank : failed) {
    if (std::find(s.rejoined_peers.begin(), s.rejoined_peers.end(), rank) == s.rejoined_peers.end())
      out.push_back(rank);
  }
  return out;
}

// failed_peers: the failed ranks that did not rejoin, each in failures with the last iteration
// its process logged (the rejoined ones are there already, from their summaries).
void add_failed(run::RunSummary& s, const std::filesystem::path& run_dir,
                const std::vector<int>& failed) {
  s.failed_peers = still_failed(failed, s);
  for (int rank : s.failed_peers) {
    s.failures.push_back(
        {rank, run::last_logged_iteration(run_dir / fmt::format("peer-{}.jsonl", rank)), {}});
  }
  std::ranges::sort(s.failures, {}, &run::FailedPeer::rank);
}

}  // namespace

run::RunSummary summarize_run(const std::filesystem::path& run_dir,
                              const std::vector<int>& failed_peers) {
  const auto config = multi_peer_config(run_dir);
  const run::RunDirectory run(run_dir, -1);
  auto summary = run::merge_run_summary(run_dir, config.peers);
  add_failed(summary, run_dir, failed_peers);
  run.write_json(run::kSummaryFile, summary);
  log_results(summary, run_dir);
  return summary;
}

run::RunSummary summarize_runs(const std::vector<std::filesystem::path>& run_dirs,
                               const std::filesystem::path& out) {
  std::optional<run::RunConfig> first;
  std::filesystem::path first_dir;
  for (const auto& dir : run_dirs) {
    const bool monitor_only = !std::filesystem::exists(dir / run::kRunConfigFile) &&
                              std::filesystem::exists(dir / run::kMonitorSummaryFile);
    if (monitor_only) continue;
    const auto config = multi_peer_config(dir);
    if (!first) {
      first = config;
      first_dir = dir;
    } else if (const auto what = difference(*first, config); !what.empty()) {
      throw InputError(
          fmt::format("{} and {} are not of one run: {}", first_dir.string(), dir.string(), what));
    }
  }
  if (!first) {
    throw InputError(
        fmt::format("none of {} holds a run's {}", fmt::join(run_dirs, ", "), run::kRunConfigFile));
  }
  const run::RunDirectory run(out, -1);
  auto summary = run::merge_run_summary(run_dirs, first->peers);
  run.write_json(run::kSummaryFile, summary);
  log_results(summary, out);
  return summary;
}

run::RunSummary summarize_launch(const std::filesystem::path& run_dir,
                                 const std::vector<int>& local,
                                 const std::vector<int>& failed_peers) {
  const auto config = multi_peer_config(run_dir);
  auto summary = run::merge_run_summary(run_dir, config.peers);
  add_failed(summary, run_dir, failed_peers);
  std::vector<int> running_elsewhere;
  for (int rank : summary.missing_peers) {
    const bool here = std::find(local.begin(), local.end(), rank) != local.end();
    if (!here && std::filesystem::exists(run_dir / run::peer_log_file(rank)))
      running_elsewhere.push_back(rank);
  }
  const auto file = run_dir / run::kSummaryFile;
  const std::string text = nlohmann::json(summary).dump(2) + "\n";
  if (running_elsewhere.empty()) {
    run::write_file_atomically(file, text);
    log_results(summary, run_dir);
  } else {
    if (!run::create_file_atomically(file, text) && knows_more(summary, file)) {
      run::write_file_atomically(file, text);
    }
    spdlog::info(
        "ranks {} are another host's and still running in this directory: the launcher that "
        "finishes last writes {} with every peer",
        fmt::join(running_elsewhere, ","), file);
  }
  return summary;
}

void check_suspects(const run::RunSummary& summary, const std::filesystem::path& run_dir) {
  if (summary.suspected_peers.empty()) return;
  std::vector<std::string> reports;
  bool undefended = false;
  for (const auto& s : summary.suspected_peers) {
    reports.push_back(
        fmt::format("rank {} by rank {} (from round {}: {:.3g} from its model, {:.1f}x "
                    "its other in-neighbours', --robust {})",
                    s.rank, s.reported_by, s.round, s.distance,
                    s.distance / std::max(s.reference, 1e-300), s.robust));
    undefended = undefended || s.robust == "none";
  }
  const auto text =
      fmt::format("suspected of pushing poisoned models: {}", fmt::join(reports, "; "));
  if (!undefended) {
    spdlog::warn("{}; their contributions were clipped (suspected_peers in {})", text,
                 run_dir / run::kSummaryFile);
    return;
  }
  throw IoError(fmt::format(
      "{}; without --robust clip their contributions were mixed in unchanged, so the models may be "
      "poisoned (suspected_peers in {}; rerun with --robust clip to defend)",
      text, run_dir / run::kSummaryFile));
}

}  // namespace sgp::launch
