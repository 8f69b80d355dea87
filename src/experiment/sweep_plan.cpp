#include "sgp/experiment/sweep_plan.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sgp/config/algorithm.hpp"
#include "sgp/config/settings.hpp"
#include "sgp/data/dataset.hpp"
#include "sgp/error.hpp"
#include "sgp/model/evaluator.hpp"
#include "sgp/model/model_spec.hpp"
#include "sgp/run/file_names.hpp"
#include "sgp/run/run_directory.hpp"
#include "sgp/run/summaries.hpp"
#include "sgp/topology/analysis.hpp"
#include "sgp/topology/dot_file.hpp"
#include "sgp/topology/generator.hpp"
#include "simulate_sweep.hpp"

namespace sgp::experiment {

namespace {

// The point's topology as written in its file (kind generated with N and a, or the DOT file
// read with a), with endpoints on 127.0.0.1.
topology::Schedule point_topology(const SweepPoint& p) {
  const double a = p.config.self_weight;
  const std::optional<double> self_weight = a > 0.0 ? std::optional<double>(a) : std::nullopt;
  if (p.topology_is_file) {
    topology::DotReadOptions options;
    options.self_weight = self_weight;
    return topology::read_dot_file(p.topology, options);
  }
  topology::GeneratorOptions options;
  options.num_peers = p.peers;
  options.self_weight = self_weight;
  options.degree = p.topology_degree;
  return topology::generate_topology(topology::parse_topology_kind(p.topology), options);
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char ch : text) quoted += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return quoted + "\"";
}

template <class T>
std::string cell(const std::optional<T>& value) {
  return value ? fmt::format("{}", *value) : "";
}

const std::vector<std::string> kGridColumns = {"point", "topology",     "peers", "self_weight",
                                               "algo",  "gossip_every", "seed"};
const std::vector<std::string> kResultColumns = {"status",
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

std::vector<std::string> csv_row(const PlannedPoint& plan, const std::vector<std::string>& axes) {
  const SweepPoint& p = *plan.point;
  run::RunSummary s;
  if (plan.status == "finished") {
    if (auto j = run::read_json_file(plan.dir / run::kSummaryFile)) s = j->get<run::RunSummary>();
  }
  std::vector<std::string> row = {p.name(),
                                  p.topology,
                                  plan.peers > 0 ? std::to_string(plan.peers) : "",
                                  fmt::format("{}", p.config.self_weight),
                                  std::string(name_of(p.config.algo)),
                                  std::to_string(p.config.gossip_every),
                                  std::to_string(p.config.seed)};
  for (const auto& key : axes) row.push_back(config::find_setting(key)->text(p.config));
  const std::vector<std::string> results = {plan.status,
                                            cell(plan.mixing_self_weight),
                                            cell(plan.rate),
                                            plan.period > 0 ? std::to_string(plan.period) : "",
                                            cell(s.iterations),
                                            cell(s.final_average_model_accuracy),
                                            cell(s.mean_peer_accuracy),
                                            cell(s.min_peer_accuracy),
                                            cell(s.max_peer_accuracy),
                                            cell(s.final_consensus_error),
                                            cell(s.median_iteration_ms),
                                            cell(s.bytes_sent_per_iteration),
                                            cell(s.wall_time_s),
                                            cell(s.sum_of_weights),
                                            plan.dir.filename().string()};
  row.insert(row.end(), results.begin(), results.end());
  return row;
}

}  // namespace

PlannedPoint plan_point(const SweepPoint& p, const std::filesystem::path& root) {
  if (!p.simulate.is_null()) return plan_simulate_point(p, root);
  PlannedPoint plan;
  plan.point = &p;
  plan.dir = root / p.name();
  plan.peers = p.peers;
  try {
    plan.schedule = point_topology(p);
    plan.peers = plan.schedule->num_peers();
    const double a = p.config.self_weight;
    const auto mixing =
        config::mixing_schedule(p.config.algo, *plan.schedule,
                                a > 0.0 ? std::optional<double>(a) : std::nullopt, p.topology);
    plan.period = mixing.period();
    // allreduce holds the exact average after every round: its ring's weights are never mixed
    // with, so neither a self weight nor a rate describes it.
    const bool exact_average = info(p.config.algo).mode == gossip::Mode::allreduce;
    if (!exact_average) plan.mixing_self_weight = mixing.self_weight(0, 0);
    if (info(p.config.algo).communicates && !exact_average) {
      // Only the traffic figures depend on the parameter count; the rate does not.
      const auto parameters = model::parameter_count(
          model::parse_model_spec(p.config.model), model::input_shape(data::fashion_mnist_shape()),
          data::kFashionMnistClasses);
      plan.rate =
          topology::analyze_topology(mixing, static_cast<std::int64_t>(parameters)).consensus_rate;
    }
  } catch (const InputError& e) {
    plan.schedule.reset();
    plan.problem = e.what();
  }
  return plan;
}

nlohmann::json point_record(const SweepPoint& p) {
  if (!p.simulate.is_null()) return {{"command", "simulate"}, {"simulate", p.simulate}};
  nlohmann::json j = p.config;
  j.erase("topology");
  j.erase("monitor");
  j.erase("resume");
  j["sweep_topology"] = p.topology;
  j["sweep_peers"] = p.peers;
  return j;
}

bool already_finished(const PlannedPoint& plan) {
  const auto record = run::read_json_file(plan.dir / "sweep-point.json");
  return std::filesystem::exists(plan.dir / run::kSummaryFile) && record &&
         *record == point_record(*plan.point);
}

std::vector<std::vector<std::string>> summary_table(const std::vector<PlannedPoint>& plans) {
  const auto axes = plans.empty() ? std::vector<std::string>{} : plans.front().point->other_axes;
  std::vector<std::string> header = kGridColumns;
  header.insert(header.end(), axes.begin(), axes.end());
  header.insert(header.end(), kResultColumns.begin(), kResultColumns.end());
  std::vector<std::vector<std::string>> table = {header};
  for (const auto& plan : plans) table.push_back(csv_row(plan, axes));
  return table;
}

void write_summary_csv(const std::filesystem::path& file, const std::vector<PlannedPoint>& plans) {
  if (!plans.empty() && !plans.front().point->simulate.is_null()) {
    return write_simulate_summary_csv(file, plans);
  }
  run::write_file_atomically(file, csv_text(summary_table(plans)));
}

std::string csv_text(const std::vector<std::vector<std::string>>& rows) {
  std::string out;
  for (const auto& row : rows) {
    std::vector<std::string> fields;
    for (const auto& f : row) fields.push_back(csv_field(f));
    out += fmt::format("{}\n", fmt::join(fields, ","));
  }
  return out;
}

}  // namespace sgp::experiment
