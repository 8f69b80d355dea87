#include "sgp/experiment/sweep_runner.hpp"

#include <chrono>
#include <fstream>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "sgp/error.hpp"
#include "sgp/experiment/sweep_aggregate.hpp"
#include "sgp/experiment/sweep_plan.hpp"
#include "sgp/launch/local_processes.hpp"
#include "sgp/launch/periodic_task.hpp"
#include "sgp/log.hpp"
#include "sgp/run/file_names.hpp"
#include "sgp/run/run_directory.hpp"
#include "sgp/run/summaries.hpp"
#include "sgp/topology/dot_file.hpp"
#include "sgp/topology/generator.hpp"
#include "simulate_sweep.hpp"

namespace sgp::experiment {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string format_duration(double seconds) {
  const auto s = static_cast<long>(seconds + 0.5);
  return s >= 3600 ? fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
                   : fmt::format("{}:{:02}", s / 60, s % 60);
}

template <class T>
std::string shown(const std::optional<T>& value, const char* format, double scale = 1.0) {
  return value ? fmt::format(fmt::runtime(format), scale * *value) : "-";
}

// The launcher's latest progress line, prefixed with the point (every 15 s while it runs).
void log_point_progress(const std::string& prefix, const std::filesystem::path& log) {
  std::ifstream in(log);
  std::string line, last;
  while (std::getline(in, line))
    if (line.find("progress") != std::string::npos) last = line;
  const auto at = last.find("progress");
  if (at != std::string::npos) spdlog::info("{} {}", prefix, last.substr(at));
}

void print_dry_run(const SweepSpec& spec, const std::vector<PlannedPoint>& plans,
                   const std::filesystem::path& root, bool quick) {
  const auto n = plans.size();
  fmt::print("sweep {}{}: {} points, results would go to {}\n", spec.name,
             quick ? " (--quick)" : "", n, root.string());
  fmt::print("  {:>{}} {:<48} {:<17} {}\n", "#", 2 * std::to_string(n).size() + 1, "point",
             "sigma per period", "state");
  for (std::size_t i = 0; i < n; ++i) {
    const auto& plan = plans[i];
    const std::string state = !plan.schedule           ? "cannot run: " + plan.problem
                              : already_finished(plan) ? "finished (would be skipped)"
                                                       : "to run";
    fmt::print("  {:>{}}/{} {:<48} {:<17} {}\n", i + 1, std::to_string(n).size(), n,
               plan.point->name(), plan.rate ? fmt::format("{:.4g}", *plan.rate) : "-", state);
  }
}

// Runs one point as an `sgp launch` child in its own (fresh) directory; returns why it failed,
// or nothing. IoError when interrupted.
std::optional<std::string> run_point(const SweepSpec& spec, PlannedPoint& plan, int index,
                                     const std::string& prefix) {
  const std::string name = plan.point->name();
  if (!plan.schedule) return plan.problem;
  // An unfinished or outdated point directory is ours to redo from scratch.
  if (std::filesystem::exists(plan.dir)) {
    spdlog::info("{}: removing the unfinished or outdated results in {}", prefix,
                 plan.dir.string());
    std::filesystem::remove_all(plan.dir);
  }
  run::RunDirectory dir(plan.dir, -1);
  dir.write_json("sweep-point.json", point_record(*plan.point));
  if (!plan.point->simulate.is_null()) return run_simulate_point(plan, index, prefix);
  topology::Schedule schedule = *plan.schedule;
  // Port 0: the point's `sgp launch` picks each rank's port and holds it until the rank listens.
  schedule.set_endpoints(std::vector<std::string>(schedule.num_peers(), "tcp://127.0.0.1:0"));
  const auto topology_file = plan.dir / "topology.dot";
  topology::write_dot_file(schedule, topology_file,
                           fmt::format("sweep {}, point {}", spec.name, name));
  config::TrainConfig config = plan.point->config;
  config.topology = topology_file.string();
  config.run_dir = plan.dir.string();
  dir.write_json("sweep-settings.json", config);

  const auto log = plan.dir / "launch.log";
  launch::LocalProcesses process(
      {{index, {"launch", "--config", (plan.dir / "sweep-settings.json").string()}, log}});
  std::optional<launch::ChildFailure> failure;
  {
    launch::PeriodicTask progress(std::chrono::seconds(15),
                                  [&] { log_point_progress(prefix, log); });
    failure = process.wait();
  }
  if (process.interrupted()) {
    throw IoError(
        fmt::format("interrupted by signal {} during {}; run the same command again to "
                    "resume (finished points are kept)",
                    process.interrupted(), name));
  }
  if (failure) {
    const std::string how = failure->signal
                                ? fmt::format("sgp launch was killed by signal {}", failure->signal)
                                : fmt::format("sgp launch exited with code {}", failure->exit_code);
    const std::string tail = launch::last_lines(log, 6);
    return fmt::format("{}:\n{}", how, tail.empty() ? "(launch.log is empty)" : tail);
  }
  if (!std::filesystem::exists(plan.dir / run::kSummaryFile))
    return "sgp launch wrote no summary.json";
  return std::nullopt;
}

void log_finished(const std::string& prefix, const PlannedPoint& plan, Clock::time_point start) {
  if (!plan.point->simulate.is_null()) return;  // run_simulate_point said it
  run::RunSummary s;
  if (auto j = run::read_json_file(plan.dir / run::kSummaryFile)) s = j->get<run::RunSummary>();
  spdlog::info("{}: done in {}: average-model accuracy {}, consensus error {}, {} ms/it", prefix,
               format_duration(seconds_since(start)),
               shown(s.final_average_model_accuracy, "{:.2f}%", 100.0),
               shown(s.final_consensus_error, "{:.2g}"), shown(s.median_iteration_ms, "{:.2f}"));
}

// aggregate.csv beside summary.csv, and its lines in the log: every configuration's mean, sd
// and number of finished runs (seeds).
void write_aggregate(const std::filesystem::path& root, const std::vector<PlannedPoint>& plans) {
  if (plans.empty() || !plans.front().point->simulate.is_null()) return;
  const auto aggregate = aggregate_table(summary_table(plans));
  const auto file = root / "aggregate.csv";
  run::write_file_atomically(file, csv_text(aggregate));
  spdlog::info("per configuration, over its finished seeds (mean ± sd; {}):", file.string());
  for (const auto& line : aggregate_lines(aggregate)) spdlog::info("  {}", line);
}

}  // namespace

void run_sweep(const SweepArgs& args) {
  const SweepSpec spec = read_sweep_file(args.file, args.quick);
  const std::filesystem::path root =
      (args.results.empty() ? std::filesystem::path(args.file).parent_path() / "results"
                            : std::filesystem::path(args.results)) /
      spec.name;
  std::vector<PlannedPoint> plans;
  for (const auto& p : spec.points) plans.push_back(plan_point(p, root));
  if (args.dry_run) return print_dry_run(spec, plans, root, args.quick);

  std::filesystem::create_directories(root);
  const auto csv = root / "summary.csv";
  const int n = static_cast<int>(plans.size());
  int to_run = 0, ran = 0;
  for (auto& plan : plans) {
    if (plan.schedule && already_finished(plan)) plan.status = "finished";
    to_run += plan.status != "finished";
  }
  spdlog::info("sweep {}{}: {} points, {} already finished, {} to run; results in {}", spec.name,
               args.quick ? " (--quick)" : "", n, n - to_run, to_run, root.string());
  write_summary_csv(csv, plans);

  const auto start = Clock::now();
  std::vector<std::string> failures;
  for (int i = 0; i < n; ++i) {
    auto& plan = plans[i];
    const std::string prefix = fmt::format("[{}/{}] {}", i + 1, n, plan.point->name());
    if (plan.status == "finished") {
      spdlog::info("{}: already finished, skipped", prefix);
      continue;
    }
    const double elapsed = seconds_since(start);
    spdlog::info("{}: running ({} of {} to run; elapsed {}{})", prefix, ran + 1, to_run,
                 format_duration(elapsed),
                 ran > 0 ? ", ETA " + format_duration(elapsed / ran * (to_run - ran)) : "");
    const auto point_start = Clock::now();
    std::optional<std::string> why;
    try {
      why = run_point(spec, plan, i, prefix);
    } catch (const InputError& e) {
      why = e.what();
    } catch (const IoError&) {
      write_summary_csv(csv, plans);
      throw;
    }
    ++ran;
    plan.status = why ? "failed" : "finished";
    if (why) {
      failures.push_back(
          fmt::format("{}: {} (logs in {})", plan.point->name(), *why, plan.dir.string()));
      spdlog::error("{}: FAILED: {}\n  logs in {}", prefix, *why, plan.dir.string());
    } else {
      log_finished(prefix, plan, point_start);
    }
    write_summary_csv(csv, plans);
  }
  write_aggregate(root, plans);
  spdlog::info("sweep {}: {} of {} points finished in {} ({} run now); summary: {}", spec.name,
               n - static_cast<int>(failures.size()), n, format_duration(seconds_since(start)), ran,
               csv.string());
  if (!failures.empty()) {
    throw IoError(fmt::format("{} of {} points failed:\n  {}", failures.size(), n,
                              fmt::join(failures, "\n  ")));
  }
}

}  // namespace sgp::experiment
