// `sgp summarize`: summary.json of a run whose peers were started by something other than
// `sgp launch` (srun in scripts/sbatch-sgp, or by hand), merged exactly as `sgp launch` does;
// with several directories, the per-host directories of one run merged into one summary.
#include <CLI/CLI.hpp>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "sgp/launch/run_summary.hpp"
#include "sgp/log.hpp"

namespace sgp::cli {

void add_summarize_command(CLI::App& app) {
  auto run_dirs = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "summarize",
      "Merge a run directory's peer-<rank>-summary.json files and monitor-summary.json into its "
      "summary.json (as `sgp launch` does at the end of a run), and print the average model's "
      "accuracy and consensus error. The number of peers comes from config.json; a peer without "
      "a summary is listed in missing_peers. Several directories: those of one run's hosts "
      "(each with some ranks' files, and a monitor's), merged into one summary.json in --out; "
      "directories of different runs are refused.");
  cmd->add_option("run_dir", *run_dirs, "run directories (with config.json)")
      ->required()
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--out", *out, "where the merged summary.json goes (default: the first run_dir)");
  cmd->callback([run_dirs, out] {
    configure_logging(-1, LogLevel::info);
    std::vector<std::filesystem::path> dirs;
    for (const auto& dir : *run_dirs) {
      const auto path = std::filesystem::weakly_canonical(dir);
      if (std::find(dirs.begin(), dirs.end(), path) == dirs.end()) dirs.push_back(path);
    }
    if (dirs.size() == 1 && out->empty()) {
      launch::summarize_run(dirs.front());
    } else {
      launch::summarize_runs(dirs, out->empty() ? dirs.front() : std::filesystem::path(*out));
    }
  });
}

}  // namespace sgp::cli
