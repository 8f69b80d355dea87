#include "sgp/simulate/simulate_run.hpp"

#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "sgp/error.hpp"
#include "sgp/run/file_names.hpp"
#include "sgp/run/run_directory.hpp"
#include "sgp/run/run_files.hpp"
#include "sgp/topology/analysis.hpp"
#include "sgp/topology/dot_file.hpp"
#include "sgp/topology/generator.hpp"

namespace sgp::simulate {
namespace {

bool is_kind(const std::string& name) {
  for (auto kind : topology::all_topology_kinds()) {
    if (topology::topology_kind_name(kind) == name) return true;
  }
  return false;
}

std::size_t peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::size_t>(usage.ru_maxrss) * 1024;  // Linux: KiB
}

const char* mode_name(MixingMode m) { return m == MixingMode::sync ? "sync" : "async"; }
const char* workload_name(Workload w) {
  return w == Workload::consensus ? "consensus" : "quadratic";
}

nlohmann::json record_json(const RoundRecord& r, Workload workload) {
  nlohmann::json j{{"round", r.round},
                   {"live", r.live},
                   {"sum_of_weights", r.sum_of_weights},
                   {"consensus_error", r.consensus_error},
                   {"deviation_norm", r.deviation_norm}};
  if (r.bytes_sent) {
    j["bytes_sent"] = *r.bytes_sent;
    j["total_bytes_sent"] = *r.total_bytes_sent;
  }
  if (workload == Workload::consensus) {
    j["mean_error"] = r.target_error;
  } else {
    j["optimum_error"] = r.target_error;
    j["optimality_gap"] = *r.optimality_gap;
    j["mean_peer_gap"] = *r.mean_peer_gap;
  }
  return j;
}

// "RANK@ROUND" items of one kind, as given.
nlohmann::json change_items(const SimulationOptions& o, PeerChange::Kind kind) {
  nlohmann::json items = nlohmann::json::array();
  for (const auto& c : o.changes)
    if (c.kind == kind) items.push_back(fmt::format("{}@{}", c.rank, c.round));
  return items;
}

// Who failed and joined when (and who sponsored each joiner), in the order applied.
nlohmann::json membership_json(const std::vector<MembershipStep>& steps) {
  nlohmann::json events = nlohmann::json::array();
  for (const auto& step : steps) {
    for (int r : step.failed)
      events.push_back({{"round", step.round}, {"rank", r}, {"event", "failed"}});
    for (const auto& [joiner, sponsor] : step.joined) {
      events.push_back(
          {{"round", step.round}, {"rank", joiner}, {"event", "joined"}, {"sponsor", sponsor}});
    }
  }
  return events;
}

nlohmann::json config_json(const SimulateCommand& c, const topology::Schedule& s) {
  const auto& o = c.options;
  return {{"command", "simulate"},
          {"topology", c.topology},
          {"peers", s.num_peers()},
          {"period", s.period()},
          {"self_weight", c.self_weight ? nlohmann::json(*c.self_weight) : nlohmann::json()},
          {"degree", c.degree},
          {"topology_seed", c.topology_seed},
          {"dim", o.dim},
          {"rounds", o.rounds},
          {"algo", algorithm_name(o)},
          {"mode", mode_name(o.mode)},
          {"running_sums", o.running_sums},
          {"drop", o.faults.drop},
          {"duplicate", o.faults.duplicate},
          {"max_delay", o.faults.max_delay},
          {"workload", workload_name(o.workload)},
          {"lr", o.lr},
          {"noise", o.noise},
          {"spread", o.spread},
          {"momentum", o.optimizer.momentum},
          {"momentum_kind",
           o.optimizer.momentum_kind == MomentumKind::quasi_global ? "quasi-global" : "local"},
          {"global_average_every", o.optimizer.global_average_every},
          {"slow_momentum", o.optimizer.slow_momentum ? nlohmann::json(*o.optimizer.slow_momentum)
                                                      : nlohmann::json()},
          {"seed", o.seed},
          {"threads", o.threads},
          {"log_every", o.log_every},
          {"compress", o.compressor ? nlohmann::json(compress::compressor_name(*o.compressor))
                                    : nlohmann::json()},
          {"consensus_step", o.compressor ? nlohmann::json(consensus_step(o)) : nlohmann::json()},
          {"fail", change_items(o, PeerChange::Kind::fail)},
          {"join", change_items(o, PeerChange::Kind::join)}};
}

// The run's figures in summary.json: the last record as final_*, the contraction fit, time,
// memory and, async, the message counts.
void add_results(nlohmann::json& summary, const SimulateCommand& c,
                 const SimulationResult& result) {
  const auto final_json = record_json(result.final_record, c.options.workload);
  for (auto it = final_json.begin(); it != final_json.end(); ++it) {
    if (it.key() != "round") summary["final_" + it.key()] = it.value();
  }
  const auto& fit = result.contraction;
  summary["measured_contraction_per_period"] =
      fit.per_period ? nlohmann::json(*fit.per_period) : nlohmann::json();
  summary["contraction_from_round"] = fit.from_round;
  summary["contraction_to_round"] = fit.to_round;
  summary["contraction_floor_reached"] = fit.floor_reached;
  summary["wall_time_s"] = result.wall_time_s;
  summary["setup_time_s"] = result.setup_time_s;
  summary["seconds_per_round"] = result.wall_time_s / static_cast<double>(c.options.rounds);
  summary["state_bytes"] = result.state_bytes;
  summary["diverged_at_round"] =
      result.diverged_at ? nlohmann::json(*result.diverged_at) : nlohmann::json();
  summary["peak_rss_bytes"] = peak_rss_bytes();
  if (result.final_record.total_bytes_sent) {
    summary["bytes_per_round"] = static_cast<double>(*result.final_record.total_bytes_sent) /
                                 static_cast<double>(result.final_record.round);
  }
  if (c.options.mode == MixingMode::async) {
    const auto& m = result.messages;
    summary["messages"] = {{"sent", m.sent},       {"lost", m.lost},   {"duplicated", m.duplicated},
                           {"skipped", m.skipped}, {"stale", m.stale}, {"applied", m.applied}};
  }
}

// The final figures on stdout.
void print_result(const SimulateCommand& c, const SimulationResult& result,
                  const nlohmann::json& summary, std::size_t membership_changes) {
  const auto& fit = result.contraction;
  fmt::print(
      "after {} rounds: consensus error {:.3e}, {} {:.3e}, sum of w {:.6f}; {:.1f} s ({:.2f} ms "
      "per "
      "round), peak memory {:.0f} MiB\n",
      result.final_record.round, result.final_record.consensus_error,
      c.options.workload == Workload::consensus ? "mean error" : "optimality gap",
      c.options.workload == Workload::consensus ? result.final_record.target_error
                                                : *result.final_record.optimality_gap,
      result.final_record.sum_of_weights, result.wall_time_s,
      1e3 * result.wall_time_s / static_cast<double>(c.options.rounds),
      static_cast<double>(peak_rss_bytes()) / (1 << 20));
  if (summary.contains("bytes_per_round")) {
    const double per_round = summary["bytes_per_round"].get<double>();
    fmt::print("payload bytes sent: {:.0f} per round ({:.1f} per peer){}\n", per_round,
               per_round / summary["peers"].get<double>(),
               c.options.compressor ? fmt::format(", --compress {}, gamma {}",
                                                  compress::compressor_name(*c.options.compressor),
                                                  consensus_step(c.options))
                                    : std::string());
  }
  if (membership_changes > 0) {
    fmt::print("{} of {} peers live at the end ({} membership changes)\n", result.final_record.live,
               summary["peers"].get<int>(), membership_changes);
  }
  if (result.diverged_at) {
    fmt::print("{} diverged: z is not finite at round {}; the run stopped there\n",
               algorithm_name(c.options), *result.diverged_at);
  } else if (c.options.workload == Workload::quadratic) {
    fmt::print("{}: optimum error mean_i ||z_i - theta*||^2 / ||theta*||^2 = {:.3e}\n",
               algorithm_name(c.options), result.final_record.target_error);
  }
  if (fit.per_period) {
    fmt::print("contraction per period: measured {:.6g} (rounds {}..{}{})", *fit.per_period,
               fit.from_round, fit.to_round,
               fit.floor_reached ? ", down to the rounding floor" : "");
    if (summary.contains("predicted_consensus_rate")) {
      fmt::print(", predicted sigma {:.6g}", summary["predicted_consensus_rate"].get<double>());
      if (summary.contains("predicted_asymptotic_rate"))  // not above 256 peers
        fmt::print(", rho {:.6g}", summary["predicted_asymptotic_rate"].get<double>());
    }
    fmt::print("\n");
  }
}

}  // namespace

topology::Schedule simulation_schedule(const SimulateCommand& c) {
  topology::Schedule schedule = [&] {
    if (is_kind(c.topology)) {
      if (c.peers < 2) {
        throw InputError(
            fmt::format("sgp simulate: --topology {} needs --peers N (N >= 2)", c.topology));
      }
      topology::GeneratorOptions g;
      g.num_peers = c.peers;
      g.self_weight = c.self_weight;
      g.degree = c.degree;
      g.seed = c.topology_seed;
      g.base_port = 1;  // endpoints mean nothing here; this leaves room for 65535 peers
      return topology::generate_topology(topology::parse_topology_kind(c.topology), g);
    }
    if (!std::filesystem::exists(c.topology)) {
      throw InputError(
          fmt::format("sgp simulate: --topology {}: neither a topology kind nor a file; kinds:\n{}",
                      c.topology, topology::topology_kinds_help()));
    }
    topology::DotReadOptions read;
    read.self_weight = c.self_weight;
    auto s = topology::read_dot_file(c.topology, read);
    if (c.peers != 0 && c.peers != s.num_peers()) {
      throw InputError(fmt::format("sgp simulate: --peers {} but {} has {} peers", c.peers,
                                   c.topology, s.num_peers()));
    }
    return s;
  }();
  topology::require_strongly_connected(schedule, c.topology);
  return schedule;
}

void run_simulate(const SimulateCommand& c) {
  const auto schedule = simulation_schedule(c);
  require_fits_in_memory(schedule, c.options);
  const auto membership = plan_membership(schedule, c.options.changes, c.options.rounds);
  const std::filesystem::path dir = c.run_dir.empty() ? run::create_default_run_dir("simulate")
                                                      : std::filesystem::path(c.run_dir);
  run::RunDirectory run(dir, -1);
  run.claim({c.overwrite ? run::RunStart::overwrite : run::RunStart::fresh, {}, false});
  auto config = config_json(c, schedule);
  config["run_id"] = run.run_id();
  run.write_json(run::kRunConfigFile, config);

  nlohmann::json summary = config;
  summary.erase("command");
  summary["membership_changes"] = membership_json(membership);
  if (c.predict && schedule.num_peers() <= topology::kMaxSpectralPeers) {
    const auto report =
        topology::analyze_topology(schedule, static_cast<std::int64_t>(c.options.dim));
    summary["predicted_consensus_rate"] = *report.consensus_rate;
    // Above kDenseSpectralPeers sigma is iterative and rho is not computed.
    if (report.asymptotic_rate) summary["predicted_asymptotic_rate"] = *report.asymptotic_rate;
    summary["prediction_time_s"] = report.rate_seconds;
    spdlog::info("predicted the consensus rate of {} peers in {:.3f} s ({})", schedule.num_peers(),
                 report.rate_seconds,
                 report.asymptotic_rate ? "dense" : "Lanczos on vectors, no rho");
  }

  std::ofstream records(dir / run::kSimulateLogFile);
  if (!records)
    throw IoError(fmt::format("cannot write {}", (dir / run::kSimulateLogFile).string()));
  spdlog::info("simulating {} peers ({}, {}), dim {}, {} rounds on {} threads",
               schedule.num_peers(), algorithm_name(c.options), workload_name(c.options.workload),
               c.options.dim, c.options.rounds, c.options.threads);
  const auto result = simulate(schedule, c.options, [&](const RoundRecord& r) {
    records << record_json(r, c.options.workload).dump() << '\n' << std::flush;
  });
  if (!records)
    throw IoError(fmt::format("writing {} failed", (dir / run::kSimulateLogFile).string()));

  add_results(summary, c, result);
  run.write_json(run::kSummaryFile, summary);
  fmt::print("{}\n", dir.string());
  print_result(c, result, summary, summary["membership_changes"].size());
}

}  // namespace sgp::simulate
