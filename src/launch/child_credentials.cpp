#include "sgp/launch/child_credentials.hpp"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <fmt/std.h>

#include "sgp/error.hpp"
#include "sgp/topology/schedule.hpp"

namespace sgp::launch {
namespace {

// A fresh private directory: one left by a launcher that was killed is removed first (its
// passwords belong to a run that is over).
void make_private_directory(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (::mkdir(dir.c_str(), 0700) != 0) {
    throw IoError(fmt::format("{}: cannot create the run's private directory: {}", dir,
                              std::strerror(errno)));
  }
  ::chmod(dir.c_str(), 0700);  // whatever the umask
}

}  // namespace

bool wants_run_credentials(const config::TrainConfig& c, const topology::Schedule& schedule,
                           std::size_t ranks_here) {
  return !c.insecure && !schedule.has_public_keys() &&
         ranks_here == static_cast<std::size_t>(schedule.num_peers());
}

ChildCredentials::ChildCredentials(const std::filesystem::path& run_dir, int num_peers,
                                   bool with_monitor)
    : run_dir_(run_dir),
      dir_(gossip::run_credentials_file(run_dir, 0).parent_path()),
      table_(num_peers, with_monitor) {
  make_private_directory(dir_);
  try {
    for (int r = 0; r < num_peers; ++r)
      gossip::write_run_credentials(gossip::run_credentials_file(run_dir, r), table_.of(r));
  } catch (...) {  // no destructor runs: remove what was written
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    throw;
  }
  spdlog::info(
      "per-run credentials: every connection between the peers{} is authenticated with a "
      "password of this run (not encrypted; --insecure: none)",
      with_monitor ? " and to the monitor" : "");
}

ChildCredentials::~ChildCredentials() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
  if (ec) spdlog::warn("{}: could not remove the run's private directory: {}", dir_, ec.message());
}

std::vector<std::string> ChildCredentials::arguments(int rank) const {
  return {"--run-credentials", file(rank).string()};
}

std::filesystem::path ChildCredentials::file(int rank) const {
  return gossip::run_credentials_file(run_dir_, rank);
}

transport::PlainServer ChildCredentials::monitor() const {
  return gossip::plain_server(table_.of(gossip::kMonitorRank));
}

}  // namespace sgp::launch
