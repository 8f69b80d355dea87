#include "sgp/launch/refused_run.hpp"

#include <fmt/format.h>
#include <fmt/std.h>
#include <spdlog/spdlog.h>

#include "sgp/run/run_directory.hpp"
#include "sgp/run/run_files.hpp"

namespace sgp::launch {

bool anything_trained(const std::filesystem::path& dir, const std::vector<int>& ranks) {
  for (const auto& file : run::result_files(dir, ranks)) {
    if (file.extension() != ".jsonl" || !file.filename().string().starts_with("peer-")) continue;
    if (run::last_logged_iteration(file).value_or(0) > 0) return true;
  }
  return false;
}

RefusedRunCleanup::RefusedRunCleanup(std::filesystem::path dir, std::vector<int> ranks, bool fresh)
    : dir_(std::move(dir)), ranks_(std::move(ranks)), fresh_(fresh) {}

RefusedRunCleanup::~RefusedRunCleanup() {
  if (!fresh_ || std::uncaught_exceptions() <= exceptions_) return;
  try {
    if (anything_trained(dir_, ranks_)) return;
    std::error_code ec;
    for (const auto& file : run::result_files(dir_, ranks_)) std::filesystem::remove_all(file, ec);
    if (ranks_.empty()) {  // the launcher's own copies of the topology (--base-port, --link-rate)
      for (const char* name : {"topology-readdressed.dot", "topology-emulated.dot"})
        std::filesystem::remove(dir_ / name, ec);
    }
    std::filesystem::remove(dir_ / "checkpoints", ec);  // only when empty
    std::filesystem::remove(dir_, ec);                  // only when that emptied it
    spdlog::info("nothing was trained: removed what this launch wrote in {}", dir_);
  } catch (const std::exception& e) {  // a destructor must not throw: the run's error goes on
    spdlog::warn("{}: could not remove what this launch wrote: {}", dir_, e.what());
  }
}

}  // namespace sgp::launch
