#pragma once
// The names of the files of a run directory, in one place: every module that writes or reads
// one names it from here (docs/run-directory.md says what each holds and who writes it).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sgp::run {

// Files of the run as a whole.
inline constexpr std::string_view kRunConfigFile = "config.json";
inline constexpr std::string_view kRunMarkerFile = "run.json";  // the run id
inline constexpr std::string_view kSummaryFile = "summary.json";
inline constexpr std::string_view kPartitionFile = "partition.json";
inline constexpr std::string_view kMonitorLogFile = "monitor.jsonl";
inline constexpr std::string_view kMonitorSummaryFile = "monitor-summary.json";
inline constexpr std::string_view kConsensusLogFile = "consensus.jsonl";
inline constexpr std::string_view kSimulateLogFile = "simulate.jsonl";
// The topology as the peers mix on it (sgp launch): the file's graph with the weights used.
inline constexpr std::string_view kMixingTopologyFile = "mixing.dot";
inline constexpr std::string_view kAverageModelFile = "model-average.bin";
inline constexpr std::string_view kCheckpointDir = "checkpoints";

// Files of one rank: "peer-<rank>.jsonl" (its records), "peer-<rank>-summary.json",
// "peer-<rank>-model.bin" and "peer-<rank>.log" (its launcher's record of its output).
std::string peer_log_file(int rank);
std::string peer_summary_file(int rank);
std::string peer_model_file(int rank);
std::string peer_output_file(int rank);

// "checkpoint-<rank>-<iteration>.bin"; nothing for any other name, or numbers out of range.
struct CheckpointFileName {
  int rank = 0;
  std::int64_t iteration = 0;
};
std::string checkpoint_file_name(int rank, std::int64_t iteration);
std::optional<CheckpointFileName> parse_checkpoint_file_name(std::string_view name);

}  // namespace sgp::run
