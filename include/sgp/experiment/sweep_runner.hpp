#pragma once
// `sgp sweep FILE`: runs every point of a sweep's grid (sweep_spec.hpp) one after another on this
// host, each as an `sgp launch` child on a freshly generated topology with free local ports, and
// keeps <results>/<name>/summary.csv up to date after each point. A point whose summary.json
// exists with the same settings is skipped, so an interrupted sweep resumes where it stopped.
#include <string>

namespace sgp::experiment {

struct SweepArgs {
  std::string file;
  std::string results;   // empty: results/ next to the sweep file
  bool quick = false;    // apply the file's [quick] table
  bool dry_run = false;  // list the points and their state; write nothing
};

// IoError when a point failed (after running the others) or on Ctrl-C.
void run_sweep(const SweepArgs& args);

}  // namespace sgp::experiment
