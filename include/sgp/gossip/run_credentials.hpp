#pragma once
// Per-run credentials of a keyless run whose every process is on this host (sgp launch, sgp
// consensus --local; --insecure turns them off): a random PLAIN password (transport/plain.hpp)
// for every (sender, receiver) pair, the receivers being the ranks and the consensus monitor.
// The launcher makes the table in memory and keeps the monitor's share; each peer gets only its
// own (the passwords it presents and those it admits) in a file of the run's private directory
// (run_credentials_file), which the launcher removes at its end: no password outlives the run.
// Until then a rank restarted by hand (sgp peer --join) finds its share there. One password per
// pair, not one per run: a rank knows nothing that lets it pose as another rank, and a process that
// takes over a dead peer's port learns only passwords that open that port.
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "sgp/transport/plain.hpp"

namespace sgp::gossip {

inline constexpr int kMonitorRank = -1;  // the consensus monitor, as a receiver

// One process's share of the table.
struct RunCredentials {
  int rank = kMonitorRank;             // whose share
  std::map<int, std::string> present;  // receiver -> the password this rank presents to it
  std::map<int, std::string> admit;    // sender rank -> the password it must present here
};

class RunCredentialTable {
 public:
  // Fresh random passwords (256 bits each) for every pair among `num_peers` ranks, and from each
  // rank to the monitor when `with_monitor`. IoError when the system has no randomness to give.
  RunCredentialTable(int num_peers, bool with_monitor);
  // The share of `rank` (0..N-1, or kMonitorRank).
  RunCredentials of(int rank) const;

 private:
  int num_peers_;
  std::map<std::pair<int, int>, std::string> passwords_;  // (sender, receiver) -> password
};

// Writes `credentials` to `path`, created exclusively with mode 0600. IoError when it cannot.
void write_run_credentials(const std::filesystem::path& path, const RunCredentials& credentials);
// Reads a file written by write_run_credentials. InputError naming the file when it is missing
// or malformed.
RunCredentials read_run_credentials(const std::filesystem::path& path);

// Where a launcher puts rank's share: <run-dir>/.credentials/peer-<rank>.json (the directory
// 0700, the file 0600).
std::filesystem::path run_credentials_file(const std::filesystem::path& run_dir, int rank);

// The PLAIN server of a share: every sender it admits, with its password.
transport::PlainServer plain_server(const RunCredentials& credentials);

}  // namespace sgp::gossip
