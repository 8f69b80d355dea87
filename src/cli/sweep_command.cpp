// `sgp sweep FILE`: runs every point of a sweep's grid (sgp/peer/sweep_spec.hpp) one after
// another on this host, each as an `sgp launch` child on a freshly generated topology with free
// local ports, and keeps <results>/<name>/summary.csv up to date after each point.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <fstream>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "local_processes.hpp"
#include "periodic_task.hpp"
#include "sgp/data/dataset.hpp"
#include "sgp/error.hpp"
#include "sgp/log.hpp"
#include "sgp/model/model_spec.hpp"
#include "sgp/peer/algorithm.hpp"
#include "sgp/peer/run_directory.hpp"
#include "sgp/peer/sweep_spec.hpp"
#include "sgp/topology/analysis.hpp"
#include "sgp/topology/dot_file.hpp"
#include "sgp/topology/generator.hpp"
#include "training_flags.hpp"

namespace sgp::cli {

namespace {

using Clock = std::chrono::steady_clock;

// The model's parameters on Fashion-MNIST (only the traffic figures of the topology analysis
// depend on the parameter count; the consensus rate does not).
std::int64_t parameter_count(const peer::TrainConfig& c) {
  const model::Shape image{data::kFashionMnistRows, data::kFashionMnistCols, 1};
  return static_cast<std::int64_t>(
      model::parameter_count(model::parse_model_spec(c.model), image, data::kFashionMnistClasses));
}

// The point's topology as written in its file (kind generated with N and a, or the DOT file
// read with a), with endpoints on 127.0.0.1.
topology::Schedule point_topology(const peer::SweepPoint& p) {
  const std::optional<double> a =
      p.self_weight > 0.0 ? std::optional<double>(p.self_weight) : std::nullopt;
  if (p.topology_is_file) {
    topology::DotReadOptions options;
    options.self_weight = a;
    return topology::read_dot_file(p.topology, options);
  }
  topology::GeneratorOptions options;
  options.num_peers = p.peers;
  options.self_weight = a;
  return topology::generate_topology(topology::parse_topology_kind(p.topology), options);
}

struct PlannedPoint {
  const peer::SweepPoint* point = nullptr;
  std::filesystem::path dir;
  std::optional<topology::Schedule> schedule;  // empty when it could not be made
  std::string problem;                         // why not
  int peers = 0;
  std::optional<double> rate;  // sigma per period of the schedule the algo mixes with
  int period = 0;
  std::optional<double> mixing_self_weight;  // rank 0's p_00 in phase 0 of that schedule
  std::string status = "not run";            // finished | failed | not run
  std::string why;                           // for a failure
};

PlannedPoint plan_point(const peer::SweepPoint& p, const std::filesystem::path& root) {
  PlannedPoint plan;
  plan.point = &p;
  plan.dir = root / p.name();
  plan.peers = p.peers;
  try {
    plan.schedule = point_topology(p);
    plan.peers = plan.schedule->num_peers();
    const auto algo = peer::parse_algorithm(p.algo);
    const auto mixing = peer::mixing_schedule(
        algo, *plan.schedule,
        p.self_weight > 0.0 ? std::optional<double>(p.self_weight) : std::nullopt, p.topology);
    plan.period = mixing.period();
    plan.mixing_self_weight = mixing.self_weight(0, 0);
    if (peer::communicates(algo)) {
      plan.rate = topology::analyze_topology(mixing, parameter_count(p.config)).consensus_rate;
    }
  } catch (const InputError& e) {
    plan.schedule.reset();
    plan.problem = e.what();
  }
  return plan;
}

// What identifies a point's results: every setting except where files and ports go. A finished
// point is only skipped when this matches (so --quick and full results never mix silently).
nlohmann::json point_record(const peer::SweepPoint& p) {
  nlohmann::json j = p.config;
  j.erase("topology");
  j.erase("monitor");
  j.erase("resume");
  j["sweep_topology"] = p.topology;
  j["sweep_peers"] = p.peers;
  return j;
}

bool already_finished(const PlannedPoint& plan) {
  const auto record = peer::read_json_file(plan.dir / "sweep-point.json");
  return std::filesystem::exists(plan.dir / "summary.json") && record &&
         *record == point_record(*plan.point);
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char ch : text) quoted += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return quoted + "\"";
}

std::string json_number(const nlohmann::json& summary, const char* key) {
  if (!summary.contains(key) || !summary[key].is_number()) return "";
  return fmt::format("{}", summary[key].get<double>());
}

const std::vector<std::string> kCsvColumns = {"point",
                                              "topology",
                                              "peers",
                                              "self_weight",
                                              "algo",
                                              "gossip_every",
                                              "seed",
                                              "partition",
                                              "status",
                                              "mixing_self_weight",
                                              "predicted_consensus_rate",
                                              "topology_period",
                                              "iterations",
                                              "final_average_model_accuracy",
                                              "mean_peer_accuracy",
                                              "min_peer_accuracy",
                                              "max_peer_accuracy",
                                              "final_consensus_error",
                                              "median_iteration_ms",
                                              "bytes_sent_per_iteration",
                                              "wall_time_s",
                                              "sum_of_weights",
                                              "run_dir"};

void write_summary_csv(const std::filesystem::path& file, const std::vector<PlannedPoint>& plans) {
  std::string out = fmt::format("{}\n", fmt::join(kCsvColumns, ","));
  for (const auto& plan : plans) {
    const auto& p = *plan.point;
    nlohmann::json s = nlohmann::json::object();
    if (plan.status == "finished") s = peer::read_json_file(plan.dir / "summary.json").value_or(s);
    const std::vector<std::string> row = {
        p.name(),
        p.topology,
        plan.peers > 0 ? std::to_string(plan.peers) : "",
        fmt::format("{}", p.self_weight),
        p.algo,
        std::to_string(p.gossip_every),
        std::to_string(p.seed),
        p.partition,
        plan.status,
        plan.mixing_self_weight ? fmt::format("{}", *plan.mixing_self_weight) : "",
        plan.rate ? fmt::format("{}", *plan.rate) : "",
        plan.period > 0 ? std::to_string(plan.period) : "",
        s.contains("iterations") ? s["iterations"].dump() : "",
        json_number(s, "final_average_model_accuracy"),
        json_number(s, "mean_peer_accuracy"),
        json_number(s, "min_peer_accuracy"),
        json_number(s, "max_peer_accuracy"),
        json_number(s, "final_consensus_error"),
        json_number(s, "median_iteration_ms"),
        json_number(s, "bytes_sent_per_iteration"),
        json_number(s, "wall_time_s"),
        json_number(s, "sum_of_weights"),
        plan.dir.filename().string()};
    std::vector<std::string> fields;
    for (const auto& f : row) fields.push_back(csv_field(f));
    out += fmt::format("{}\n", fmt::join(fields, ","));
  }
  peer::write_file_atomically(file, out);
}

std::string format_duration(double seconds) {
  const auto s = static_cast<long>(seconds + 0.5);
  return s >= 3600 ? fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
                   : fmt::format("{}:{:02}", s / 60, s % 60);
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

struct SweepArgs {
  std::string file;
  std::string results;
  bool quick = false;
  bool dry_run = false;
};

void run_sweep(const SweepArgs& args) {
  configure_logging(-1, "info");
  const peer::SweepSpec spec = peer::read_sweep_file(args.file, args.quick);
  const std::filesystem::path root =
      (args.results.empty() ? std::filesystem::path(args.file).parent_path() / "results"
                            : std::filesystem::path(args.results)) /
      spec.name;
  std::vector<PlannedPoint> plans;
  for (const auto& p : spec.points) plans.push_back(plan_point(p, root));
  const int n = static_cast<int>(plans.size());

  if (args.dry_run) {
    fmt::print("sweep {}{}: {} points, results would go to {}\n", spec.name,
               args.quick ? " (--quick)" : "", n, root.string());
    for (int i = 0; i < n; ++i) {
      const auto& plan = plans[i];
      const std::string state = !plan.schedule           ? "cannot run: " + plan.problem
                                : already_finished(plan) ? "finished (would be skipped)"
                                                         : "to run";
      fmt::print("  {:>3}/{} {:<48} rate {:<10} {}\n", i + 1, n, plan.point->name(),
                 plan.rate ? fmt::format("{:.4g}", *plan.rate) : "-", state);
    }
    return;
  }

  std::filesystem::create_directories(root);
  const auto csv = root / "summary.csv";
  int to_run = 0;
  for (auto& plan : plans) {
    if (plan.schedule && already_finished(plan)) {
      plan.status = "finished";
    } else {
      ++to_run;
    }
  }
  spdlog::info("sweep {}{}: {} points, {} already finished, {} to run; results in {}", spec.name,
               args.quick ? " (--quick)" : "", n, n - to_run, to_run, root.string());
  write_summary_csv(csv, plans);

  const auto start = Clock::now();
  int ran = 0;
  std::vector<std::string> failures;
  for (int i = 0; i < n; ++i) {
    auto& plan = plans[i];
    const std::string name = plan.point->name();
    const std::string prefix = fmt::format("[{}/{}] {}", i + 1, n, name);
    if (plan.status == "finished") {
      spdlog::info("{}: already finished, skipped", prefix);
      continue;
    }
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    const int remaining = to_run - ran;
    spdlog::info("{}: running ({} of {} to run; elapsed {}{})", prefix, ran + 1, to_run,
                 format_duration(elapsed),
                 ran > 0 ? ", ETA " + format_duration(elapsed / ran * remaining) : "");
    const auto fail = [&](const std::string& why) {
      plan.status = "failed";
      plan.why = why;
      failures.push_back(fmt::format("{}: {} (logs in {})", name, why, plan.dir.string()));
      spdlog::error("{}: FAILED: {}\n  logs in {}", prefix, why, plan.dir.string());
    };
    if (!plan.schedule) {
      fail(plan.problem);
      write_summary_csv(csv, plans);
      continue;
    }
    // An unfinished or outdated point directory is ours to redo from scratch.
    if (std::filesystem::exists(plan.dir)) {
      spdlog::info("{}: removing the unfinished or outdated results in {}", prefix,
                   plan.dir.string());
      std::filesystem::remove_all(plan.dir);
    }
    const auto point_start = Clock::now();
    try {
      peer::RunDirectory dir(plan.dir, -1);
      dir.write_json("sweep-point.json", point_record(*plan.point));
      topology::Schedule schedule = *plan.schedule;
      schedule.set_endpoints(topology::free_local_endpoints(schedule.num_peers()));
      const auto topology_file = plan.dir / "topology.dot";
      topology::write_dot_file(schedule, topology_file,
                               fmt::format("sweep {}, point {}", spec.name, name));

      peer::TrainConfig config = plan.point->config;
      config.topology = topology_file.string();
      config.run_dir = plan.dir.string();
      std::vector<std::string> child_args = {"launch"};
      const auto flags = training_arguments(config);
      child_args.insert(child_args.end(), flags.begin(), flags.end());
      const auto log = plan.dir / "launch.log";
      LocalProcesses process({{i, child_args, log}});
      std::optional<ChildFailure> failure;
      {
        PeriodicTask progress(std::chrono::seconds(15), [&] { log_point_progress(prefix, log); });
        failure = process.wait();
      }
      if (process.interrupted()) {
        write_summary_csv(csv, plans);
        throw IoError(
            fmt::format("interrupted by signal {} during {}; run the same command "
                        "again to resume (finished points are kept)",
                        process.interrupted(), name));
      }
      ++ran;
      if (failure) {
        const std::string how =
            failure->signal ? fmt::format("sgp launch was killed by signal {}", failure->signal)
                            : fmt::format("sgp launch exited with code {}", failure->exit_code);
        const std::string tail = last_lines(log, 6);
        fail(fmt::format("{}:\n{}", how, tail.empty() ? "(launch.log is empty)" : tail));
      } else if (!std::filesystem::exists(plan.dir / "summary.json")) {
        fail("sgp launch wrote no summary.json");
      } else {
        plan.status = "finished";
        const auto s =
            peer::read_json_file(plan.dir / "summary.json").value_or(nlohmann::json::object());
        spdlog::info(
            "{}: done in {}: average-model accuracy {}, consensus error {}, {} ms/it", prefix,
            format_duration(std::chrono::duration<double>(Clock::now() - point_start).count()),
            json_number(s, "final_average_model_accuracy"), json_number(s, "final_consensus_error"),
            json_number(s, "median_iteration_ms"));
      }
    } catch (const InputError& e) {
      ++ran;
      fail(e.what());
    }
    write_summary_csv(csv, plans);
  }
  spdlog::info("sweep {}: {} of {} points finished in {} ({} run now); summary: {}", spec.name,
               n - static_cast<int>(failures.size()), n,
               format_duration(std::chrono::duration<double>(Clock::now() - start).count()), ran,
               csv.string());
  if (!failures.empty()) {
    throw IoError(fmt::format("{} of {} points failed:\n  {}", failures.size(), n,
                              fmt::join(failures, "\n  ")));
  }
}

}  // namespace

void add_sweep_command(CLI::App& app) {
  auto args = std::make_shared<SweepArgs>();
  CLI::App* cmd = app.add_subcommand(
      "sweep",
      "Run every point of a sweep file's grid (experiments/*.toml) one after another on this "
      "host, each as `sgp launch` on a generated topology with free local ports. Writes "
      "<results>/<name>/<point>/ (run directories) and <results>/<name>/summary.csv; skips "
      "points already finished with the same settings, so an interrupted sweep resumes.");
  cmd->add_option("file", args->file, "sweep file (TOML; see experiments/)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_flag("--quick", args->quick, "apply the file's [quick] settings (a short version)");
  cmd->add_flag("--dry-run", args->dry_run, "list the points and their state; write nothing");
  cmd->add_option("--results", args->results,
                  "results root (default: results/ next to the sweep file); the sweep writes "
                  "<results>/<name>/");
  cmd->callback([args] { run_sweep(*args); });
}

}  // namespace sgp::cli
