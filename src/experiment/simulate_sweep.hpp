#pragma once
// Sweep files with `command = "simulate"`: each point runs `sgp simulate` instead of
// `sgp launch`. The grid's axes are `sgp simulate`'s options (topology, peers, self_weight, dim,
// rounds, mode, drop, workload, fail, ...: the flag without its dashes, with _ for -), fixed
// values go in [simulate] (and [quick]). A point's `SweepPoint::simulate` holds the options
// it sets (topology and peers included); summary.csv gets the simulation's figures.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "sgp/experiment/sweep_plan.hpp"
#include "sgp/experiment/sweep_spec.hpp"
#include "toml_reader.hpp"

namespace sgp::experiment {

// The points of a simulate sweep: topology outermost, then peers, then the other grid keys in
// the file's order. Every point is checked as `sgp simulate` would check it (kind and N, DOT
// file, --fail/--join against its schedule and rounds, memory) before anything runs.
std::vector<SweepPoint> expand_simulate_sweep(const toml::table& grid, const toml::table* fixed,
                                              const toml::table* quick_table, bool quick,
                                              const TomlReader& r,
                                              const std::filesystem::path& source);

// "<topology>_n<N>[_<key>-<value>...]" over the grid axes after topology and peers.
std::string simulate_point_name(const SweepPoint& p);

PlannedPoint plan_simulate_point(const SweepPoint& p, const std::filesystem::path& root);

// Runs `sgp simulate` for the point in plan.dir, which run_point has made afresh with its
// sweep-point.json (output in simulate.log); why it failed, or nothing. IoError when
// interrupted.
std::optional<std::string> run_simulate_point(PlannedPoint& plan, int index,
                                              const std::string& prefix);

// One row per point: the grid values, status, predicted rate and the simulation's figures.
void write_simulate_summary_csv(const std::filesystem::path& file,
                                const std::vector<PlannedPoint>& plans);

}  // namespace sgp::experiment
