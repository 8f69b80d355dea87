#pragma once
// Which files of a run directory are sgp's results, and who may write them: a run claims its
// directory before it writes anything, so that a new run never mixes its files with another's.
//
// A claim covers the whole run (sgp train, an sgp launch that starts every rank, sgp consensus
// --local) or some ranks (hand-started sgp peer, an sgp launch of a few ranks per host, a peer
// started by a launcher). run.json holds the run id: a whole-run claim writes a new one, a
// claim of ranks takes the one already there (its launcher's, or the first rank's on a shared
// filesystem), or writes it when none is.
#include <filesystem>
#include <string>
#include <vector>

#include "sgp/config/train_config.hpp"
#include "sgp/run/file_names.hpp"

namespace sgp::run {

enum class RunStart {
  fresh,      // refuse a directory that holds results of the claimed scope
  resume,     // continue the run whose results are there
  overwrite,  // delete the results of the claimed scope first
};

// resume or overwrite as the settings say, else fresh.
RunStart run_start_of(const config::TrainConfig& config);

struct RunClaim {
  RunStart start = RunStart::fresh;
  std::vector<int> ranks;  // the ranks this process answers for; empty: the whole run
  bool resumable = true;   // whether the command has --resume (for the refusal's advice)
};

// sgp's result files in `dir` that belong to `ranks` (empty: every result file of a run: its
// config.json, run.json, summaries, logs, monitor records and checkpoints), sorted. Files sgp
// does not write (a sweep's records, a user's notes) are never listed.
std::vector<std::filesystem::path> result_files(const std::filesystem::path& dir,
                                                const std::vector<int>& ranks);

// Removes the temporary files that atomic writes of `ranks`' result files (as result_files)
// left in `dir` and its checkpoints: a process killed while writing leaves its temporary file.
// Returns how many it removed.
int remove_temporary_files(const std::filesystem::path& dir, const std::vector<int>& ranks);

// Claims `dir` (which exists) and returns the run id; removes the claimed scope's temporary
// files (remove_temporary_files). fresh: InputError naming the directory
// and its results when it holds any of the claimed scope. overwrite: removes them first.
std::string claim_run_directory(const std::filesystem::path& dir, const RunClaim& claim);

// Whether every one of `ranks` wrote its peer summary (the run, or its part here, finished).
bool ranks_finished(const std::filesystem::path& dir, const std::vector<int>& ranks);

}  // namespace sgp::run
