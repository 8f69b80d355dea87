#include "sgp/launch/program_ranks.hpp"

#include <unistd.h>

#include <cstdlib>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "sgp/error.hpp"
#include "sgp/run/run_config.hpp"
#include "sgp/run/run_directory.hpp"

namespace sgp::launch {

namespace {

bool executable_file(const std::filesystem::path& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

std::filesystem::path find_program(const std::string& command) {
  if (command.find('/') != std::string::npos) {
    if (executable_file(command)) return command;
    throw InputError(fmt::format("sgp launch -- {}: no such executable file", command));
  }
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const auto candidate = std::filesystem::path(dir.empty() ? "." : dir) / command;
    if (executable_file(candidate)) return candidate;
  }
  throw InputError(fmt::format("sgp launch -- {}: not found on $PATH", command));
}

std::vector<std::string> program_environment(const config::TrainConfig& c,
                                             const std::filesystem::path& run_dir, int rank,
                                             int world_size, int local_rank,
                                             const std::string& monitor_endpoint) {
  const auto absolute = [](const std::filesystem::path& p) {
    return std::filesystem::absolute(p).string();
  };
  std::vector<std::string> env = {
      fmt::format("RANK={}", rank),
      fmt::format("WORLD_SIZE={}", world_size),
      fmt::format("LOCAL_RANK={}", local_rank),
      "SGP_CONFIG=" + absolute(run_dir / run::kRunConfigFile),
      "SGP_TOPOLOGY=" + absolute(c.topology),
      "SGP_RUN_DIR=" + absolute(run_dir),
  };
  if (!monitor_endpoint.empty()) env.push_back("SGP_MONITOR=" + monitor_endpoint);
  if (!c.keys_dir.empty()) env.push_back("SGP_KEYS=" + absolute(c.keys_dir));
  return env;
}

void add_program_evaluation(run::MonitorSummary& summary, const std::filesystem::path& run_dir) {
  const auto file = run_dir / kProgramEvaluationFile;
  if (!std::filesystem::exists(file)) return;
  const auto json = run::read_json_file(file);
  if (!json || !json->is_object() || !json->contains("iteration") || !json->contains("accuracy") ||
      !(*json)["iteration"].is_number_integer() || !(*json)["accuracy"].is_number()) {
    throw InputError(fmt::format(
        "{}: expected {{\"iteration\": N, \"accuracy\": A, \"loss\": L, \"peers\": P}} from "
        "the program's rank 0",
        file.string()));
  }
  const auto iteration = (*json)["iteration"].get<std::int64_t>();
  if (summary.final_iteration != iteration) {
    spdlog::warn(
        "{}: the average model of iteration {} was evaluated, but the monitor's last "
        "record is of iteration {}: not taken",
        file.string(), iteration, summary.final_iteration.value_or(-1));
    return;
  }
  summary.final_average_model_accuracy = (*json)["accuracy"].get<double>();
  if (json->contains("loss") && (*json)["loss"].is_number())
    summary.final_average_model_loss = (*json)["loss"].get<double>();
}

}  // namespace sgp::launch
