// `sgp sweep FILE`: every point of a sweep file's grid, one after another on this host.
#include <CLI/CLI.hpp>

#include <memory>

#include "commands.hpp"
#include "sgp/experiment/sweep_runner.hpp"
#include "sgp/log.hpp"

namespace sgp::cli {

void add_sweep_command(CLI::App& app) {
  auto args = std::make_shared<experiment::SweepArgs>();
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
  cmd->callback([args] {
    configure_logging(-1, LogLevel::info);
    experiment::run_sweep(*args);
  });
}

}  // namespace sgp::cli
