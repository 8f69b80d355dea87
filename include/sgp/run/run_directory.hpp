#pragma once
// A run directory: config.json, peer-<rank>.jsonl (one JSON object per logged step, flushed as
// written so a crash loses nothing logged) and summary.json. Whole files are written atomically.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace sgp::run {

// "No space left on device (ENOSPC)": errno's text and its name, for messages about a file.
std::string errno_text(int error);

// Writes `content` to `path` so that readers see either the old file or the new one, never a
// torn one: temporary file in the same directory, fsync, rename, fsync of the directory. On a
// failure (a full disk) the temporary file is removed and the IoError names `path` and errno.
void write_file_atomically(const std::filesystem::path& path, const std::string& content);

// The same, but only when `path` does not exist (the new file is linked into place, which fails
// when one is there, even on another host of a shared filesystem). Returns whether it did.
bool create_file_atomically(const std::filesystem::path& path, const std::string& content);

// The file whose atomic write left the temporary file `name` (".config.json.<tag>-<n>.tmp" ->
// "config.json"), or nothing when `name` is not such a temporary file.
std::optional<std::string> temporary_file_target(const std::string& name);

// The JSON value in a file, or nothing when the file is missing, unreadable or not valid JSON
// (e.g. a summary a crashed process never wrote).
std::optional<nlohmann::json> read_json_file(const std::filesystem::path& path);

// Creates and returns a new directory "<root>/<prefix>-YYYYmmdd-HHMMSS-mmm" (local time, with
// milliseconds), adding "-2", "-3", ... when that name exists: the directory is created
// exclusively, so two runs started at the same moment never share one.
std::filesystem::path create_default_run_dir(const std::string& prefix,
                                             const std::filesystem::path& root = "runs");

// Drops the records of the JSONL file `path` after `iteration` (and lines that are not a record
// with an integer "iteration", such as one torn by a kill), and returns the largest "wall_time"
// of those kept (0 when none, or no file).
double rewind_jsonl(const std::filesystem::path& path, std::int64_t iteration);

// The largest integer "iteration" of the records in the JSONL file `path`; none when it has none
// (or there is no file).
std::optional<std::int64_t> last_logged_iteration(const std::filesystem::path& path);

struct RunClaim;

class RunDirectory {
 public:
  // Creates the directory (and parents); InputError naming it if that fails. rank < 0: no
  // peer-<rank>.jsonl (a launcher or monitor).
  RunDirectory(std::filesystem::path dir, int rank);

  // Claims the directory for this run before anything is written (claim_run_directory in
  // run_files.hpp): refuses another run's results, or deletes them with --overwrite.
  void claim(const RunClaim& claim);
  // The run id of run.json; only after claim().
  const std::string& run_id() const;

  const std::filesystem::path& path() const { return dir_; }
  void write_json(std::string_view name, const nlohmann::json& value) const;
  // Appends one line to peer-<rank>.jsonl (opened on the first record) and flushes it.
  void log(const nlohmann::json& record);
  // A resume from `iteration`: drops the records of peer-<rank>.jsonl after it (the resumed run
  // writes them again; a line torn by a kill goes too) and returns the wall_time of the last
  // record kept (0 when none), from which the resumed run's wall_time continues.
  double rewind_log(std::int64_t iteration);

 private:
  std::filesystem::path log_path() const;
  std::filesystem::path dir_;
  int rank_;
  std::string run_id_;
  std::ofstream log_;
};

}  // namespace sgp::run
