#pragma once
// `sgp launch ... -- COMMAND ARGS`: any program (a PyTorch script over sgp's Python package) run
// once per rank in place of `sgp peer`. What differs from sgp's own peers lives here: finding the
// program, the environment it reads its rank and the run's settings from, and the average model's
// evaluation it reports back (the launcher's monitor cannot evaluate a model it does not know).
#include <filesystem>
#include <string>
#include <vector>

#include "sgp/config/train_config.hpp"
#include "sgp/run/summaries.hpp"

namespace sgp::launch {

// The program's file: COMMAND itself when it names a path, else the first executable of that name
// on $PATH. InputError naming COMMAND when there is none or it is not executable.
std::filesystem::path find_program(const std::string& command);

// Where rank `rank` (the `local_rank`-th started here) of a `world_size`-peer run finds what it
// needs, as NAME=VALUE: RANK, WORLD_SIZE, LOCAL_RANK, SGP_CONFIG (the run's config.json: every
// setting), SGP_TOPOLOGY, SGP_RUN_DIR, SGP_MONITOR (when there is a monitor) and SGP_KEYS (with
// --keys). The launcher adds SGP_RUN_CREDENTIALS (the rank's share of a keyless run's passwords,
// launch/child_credentials.hpp) where it made them.
std::vector<std::string> program_environment(const config::TrainConfig& config,
                                             const std::filesystem::path& run_dir, int rank,
                                             int world_size, int local_rank,
                                             const std::string& monitor_endpoint);

// The file in which the program's rank 0 reports the average model's evaluation at the end
// (sgp/torch.py): {"iteration", "peers", "accuracy", "loss"}.
inline constexpr std::string_view kProgramEvaluationFile = "average-model-evaluation.json";

// Takes the program's evaluation of the average model into the monitor's summary, when it is of
// the monitor's last record (same iteration): nothing otherwise. InputError naming the file when
// it is there but not such an object.
void add_program_evaluation(run::MonitorSummary& summary, const std::filesystem::path& run_dir);

}  // namespace sgp::launch
