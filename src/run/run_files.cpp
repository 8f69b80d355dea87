#include "sgp/run/run_files.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fmt/std.h>
#include <nlohmann/json.hpp>

#include "sgp/error.hpp"
#include "sgp/run/file_names.hpp"
#include "sgp/run/run_directory.hpp"
#include "sgp/run/summaries.hpp"

namespace sgp::run {

namespace {

// Files of the run as a whole (not of one rank).
constexpr std::array<std::string_view, 10> kRunFiles = {
    kRunConfigFile,      kRunMarkerFile,      kSummaryFile,      kPartitionFile,
    kMonitorLogFile,     kMonitorSummaryFile, kConsensusLogFile, kSimulateLogFile,
    kMixingTopologyFile, kAverageModelFile};

// The rank of "peer-<rank>.jsonl", "peer-<rank>-summary.json", "peer-<rank>-model.bin" or
// "peer-<rank>.log".
std::optional<int> peer_file_rank(const std::string& name) {
  if (!name.starts_with("peer-")) return std::nullopt;
  for (const char* suffix : {".jsonl", "-summary.json", "-model.bin", ".log"}) {
    if (!name.ends_with(suffix)) continue;
    const std::string digits = name.substr(5, name.size() - 5 - std::strlen(suffix));
    if (digits.empty() || digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string::npos) {
      return std::nullopt;
    }
    return std::stoi(digits);  // at most 9 digits: always fits
  }
  return std::nullopt;
}

bool claimed(const std::vector<int>& ranks, int rank) {
  return ranks.empty() || std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
}

bool is_result(const std::string& name, const std::vector<int>& ranks) {
  if (ranks.empty() && std::find(kRunFiles.begin(), kRunFiles.end(), name) != kRunFiles.end()) {
    return true;
  }
  const auto rank = peer_file_rank(name);
  // A peer's .log is its launcher's record of it, not the peer's own.
  return rank && claimed(ranks, *rank) && (ranks.empty() || !name.ends_with(".log"));
}

std::string new_run_id() {
  std::random_device entropy;
  std::uint64_t high = (std::uint64_t{entropy()} << 32) | entropy();
  std::uint64_t low = (std::uint64_t{entropy()} << 32) | entropy();
  return fmt::format("{:016x}{:016x}", high, low);
}

std::string marker_text(const std::string& run_id) {
  return nlohmann::json{{"run_id", run_id}}.dump(2) + "\n";
}

// The marker is opened once: checking for it after a failed read raced with another rank of the
// same directory creating it between the two steps, and called its complete file unreadable.
std::optional<std::string> read_run_id(const std::filesystem::path& dir) {
  const auto path = dir / kRunMarkerFile;
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return std::nullopt;
    throw IoError(fmt::format("{}: cannot be read ({})", path, std::strerror(errno)));
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception&) {
    throw InputError(fmt::format("{}: not the JSON of a run marker", path));
  }
  if (!j.is_object() || !j["run_id"].is_string() || j["run_id"].get<std::string>().empty()) {
    throw InputError(fmt::format("{}: expected {{\"run_id\": \"<hex>\"}}", path));
  }
  return j["run_id"].get<std::string>();
}

// The run id in run.json, or a new one written there unless another process wrote one first.
std::string adopt_or_create_run_id(const std::filesystem::path& dir) {
  if (auto id = read_run_id(dir)) return *id;
  create_file_atomically(dir / kRunMarkerFile, marker_text(new_run_id()));
  auto id = read_run_id(dir);
  SGP_ENFORCE(id.has_value(), "run.json vanished from {}", dir);
  return *id;
}

[[noreturn]] void refuse(const std::filesystem::path& dir,
                         const std::vector<std::filesystem::path>& found, const RunClaim& claim) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < std::min<std::size_t>(found.size(), 4); ++i) {
    names.push_back(std::filesystem::relative(found[i], dir).string());
  }
  if (found.size() > names.size()) names.push_back("...");
  throw InputError(fmt::format(
      "run directory {} holds another run's results ({}); give {}--overwrite to delete them "
      "first, or another --run-dir",
      dir.string(), fmt::join(names, ", "),
      claim.resumable ? "--resume to continue that run, " : ""));
}

}  // namespace

RunStart run_start_of(const config::TrainConfig& config) {
  if (config.resume) return RunStart::resume;
  return config.overwrite ? RunStart::overwrite : RunStart::fresh;
}

std::vector<std::filesystem::path> result_files(const std::filesystem::path& dir,
                                                const std::vector<int>& ranks) {
  std::vector<std::filesystem::path> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_regular_file() && is_result(entry.path().filename().string(), ranks)) {
      found.push_back(entry.path());
    }
  }
  for (const auto& entry : std::filesystem::directory_iterator(dir / kCheckpointDir, ec)) {
    const auto name = parse_checkpoint_file_name(entry.path().filename().string());
    if (name && claimed(ranks, name->rank)) found.push_back(entry.path());
  }
  std::sort(found.begin(), found.end());
  return found;
}

int remove_temporary_files(const std::filesystem::path& dir, const std::vector<int>& ranks) {
  int removed = 0;
  std::error_code ec;
  auto remove_if_ours = [&](const std::filesystem::path& path, bool checkpoint) {
    const auto target = temporary_file_target(path.filename().string());
    if (!target) return;
    const auto name = checkpoint ? parse_checkpoint_file_name(*target) : std::nullopt;
    const bool ours = checkpoint ? name && claimed(ranks, name->rank) : is_result(*target, ranks);
    std::error_code removal;
    if (ours && std::filesystem::remove(path, removal)) ++removed;
  };
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    remove_if_ours(entry.path(), false);
  }
  for (const auto& entry : std::filesystem::directory_iterator(dir / kCheckpointDir, ec)) {
    remove_if_ours(entry.path(), true);
  }
  return removed;
}

std::string claim_run_directory(const std::filesystem::path& dir, const RunClaim& claim) {
  remove_temporary_files(dir, claim.ranks);
  if (claim.start != RunStart::resume) {
    const auto found = result_files(dir, claim.ranks);
    if (!found.empty() && claim.start == RunStart::fresh) refuse(dir, found, claim);
    for (const auto& path : found) {
      std::error_code ec;
      if (!std::filesystem::remove(path, ec) && ec) {
        throw IoError(fmt::format("--overwrite: cannot delete {}: {}", path, ec.message()));
      }
    }
    if (claim.ranks.empty()) {
      const std::string id = new_run_id();
      write_file_atomically(dir / kRunMarkerFile, marker_text(id));
      return id;
    }
  }
  return adopt_or_create_run_id(dir);
}

bool ranks_finished(const std::filesystem::path& dir, const std::vector<int>& ranks) {
  return std::all_of(ranks.begin(), ranks.end(), [&dir](int rank) {
    return read_json_file(dir / peer_summary_file(rank)).has_value();
  });
}

}  // namespace sgp::run
