#pragma once
// What `sgp sweep` knows about each point before and after running it: the schedule it will mix
// with, its predicted consensus rate, and its state; and the summary.csv written from them.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sgp/experiment/sweep_spec.hpp"
#include "sgp/topology/schedule.hpp"

namespace sgp::experiment {

struct PlannedPoint {
  const SweepPoint* point = nullptr;
  std::filesystem::path dir;
  std::optional<topology::Schedule> schedule;  // empty when it could not be made
  std::string problem;                         // why not
  int peers = 0;
  std::optional<double> rate;  // sigma per period of the schedule the algo mixes with
  int period = 0;
  std::optional<double> mixing_self_weight;  // rank 0's p_00 in phase 0 of that schedule
  std::string status = "not run";            // finished | failed | not run
};

PlannedPoint plan_point(const SweepPoint& p, const std::filesystem::path& root);

// What identifies a point's results: every setting except where files and ports go. A finished
// point is only skipped when this matches (so --quick and full results never mix silently).
nlohmann::json point_record(const SweepPoint& p);
bool already_finished(const PlannedPoint& plan);

// summary.csv of a training sweep as a table: its header, then one row per point: grid values,
// status, predicted rate and the run summary's figures.
std::vector<std::vector<std::string>> summary_table(const std::vector<PlannedPoint>& plans);

// summary.csv (summary_table; a simulation sweep's own columns for `sgp simulate` points).
void write_summary_csv(const std::filesystem::path& file, const std::vector<PlannedPoint>& plans);

// Rows as CSV text (fields with commas or quotes quoted).
std::string csv_text(const std::vector<std::vector<std::string>>& rows);

}  // namespace sgp::experiment
