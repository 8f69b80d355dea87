#pragma once
// A launch refused or failed before anything trained leaves no run behind: the files its fresh
// claim wrote (run.json, config.json, the peers' logs...) are removed, and the directory too when
// that empties it, so that the corrected command can use the same --run-dir. A run that trained
// (a peer logged an iteration past 0) keeps everything, for its logs and a --resume.
#include <exception>
#include <filesystem>
#include <vector>

namespace sgp::launch {

class RefusedRunCleanup {
 public:
  // `fresh`: the claim was a new run's (not --resume or --overwrite of an existing one); only
  // then is anything removed. `ranks`: the claimed scope (empty: the whole run).
  RefusedRunCleanup(std::filesystem::path dir, std::vector<int> ranks, bool fresh);
  // Removes the run's files when an exception is leaving the scope and nothing trained.
  ~RefusedRunCleanup();
  RefusedRunCleanup(const RefusedRunCleanup&) = delete;
  RefusedRunCleanup& operator=(const RefusedRunCleanup&) = delete;

 private:
  std::filesystem::path dir_;
  std::vector<int> ranks_;
  bool fresh_;
  int exceptions_ = std::uncaught_exceptions();
};

// Whether a peer of `ranks` (empty: any) in `dir` logged an iteration past 0.
bool anything_trained(const std::filesystem::path& dir, const std::vector<int>& ranks);

}  // namespace sgp::launch
