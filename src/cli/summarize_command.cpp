// `sgp summarize`: summary.json of a run whose peers were started by something other than
// `sgp launch` (srun in scripts/sbatch-sgp, or by hand), merged exactly as `sgp launch` does.
#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "sgp/launch/launcher.hpp"
#include "sgp/log.hpp"

namespace sgp::cli {

void add_summarize_command(CLI::App& app) {
  auto run_dirs = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand(
      "summarize",
      "Merge each run directory's peer-<rank>-summary.json files and monitor-summary.json into "
      "its summary.json (as `sgp launch` does at the end of a run), and print the average "
      "model's accuracy and consensus error. The number of peers comes from config.json; a peer "
      "without a summary is listed in missing_peers.");
  cmd->add_option("run_dir", *run_dirs, "run directories (with config.json)")
      ->required()
      ->check(CLI::ExistingDirectory);
  cmd->callback([run_dirs] {
    configure_logging(-1, LogLevel::info);
    for (const auto& dir : *run_dirs) launch::summarize_run(dir);
  });
}

}  // namespace sgp::cli
