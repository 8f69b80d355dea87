#pragma once
// The per-run credentials (gossip/run_credentials.hpp) a launcher of every rank on this host
// hands to the peers it starts, so that no other local process can send them gossip or send its
// monitor snapshots: the table lives in the launcher's memory; each child's share goes to
// <run-dir>/.credentials/peer-<rank>.json (directory 0700, files 0600, never in config.json;
// kept while the run lasts, for a rank restarted with sgp peer --join), and the directory goes
// when this object does (at the launcher's end, on every path; one left by a SIGKILLed launcher
// is replaced by the next launcher of the run). `sgp launch --insecure` does without them.
#include <filesystem>
#include <string>
#include <vector>

#include "sgp/config/train_config.hpp"
#include "sgp/gossip/run_credentials.hpp"
#include "sgp/transport/plain.hpp"

namespace sgp::topology {
class Schedule;
}

namespace sgp::launch {

// Whether a launch of `ranks_here` of the schedule's ranks gets per-run credentials: the topology
// has no keys, every rank runs here, and not --insecure.
bool wants_run_credentials(const config::TrainConfig& config, const topology::Schedule& schedule,
                           std::size_t ranks_here);

class ChildCredentials {
 public:
  // Makes the table for `num_peers` ranks (and the monitor when `with_monitor`) and writes each
  // rank's share. IoError when the directory or a file cannot be written.
  ChildCredentials(const std::filesystem::path& run_dir, int num_peers, bool with_monitor);
  ~ChildCredentials();  // removes the directory and whatever is left in it
  ChildCredentials(const ChildCredentials&) = delete;
  ChildCredentials& operator=(const ChildCredentials&) = delete;

  // The arguments that hand rank `rank` its share: {"--run-credentials", FILE}.
  std::vector<std::string> arguments(int rank) const;
  // The file of rank `rank`'s share (a program's rank is told it as $SGP_RUN_CREDENTIALS).
  std::filesystem::path file(int rank) const;
  // The monitor's PLAIN server: every rank, with its password.
  transport::PlainServer monitor() const;

 private:
  std::filesystem::path run_dir_;
  std::filesystem::path dir_;  // the private directory
  gossip::RunCredentialTable table_;
};

}  // namespace sgp::launch
