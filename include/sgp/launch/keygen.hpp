#pragma once
// `sgp keygen`: CURVE keys for a topology. One keypair per rank, plus one for the consensus
// monitor, into a keys directory (secret keys mode 0600, never overwritten), and a copy of the
// topology file with each node's public_key and the graph's monitor_public_key. Every peer and
// monitor then runs with --keys DIR (each needs only its own .key file; see docs/security.md).
#include <filesystem>

namespace sgp::launch {

struct KeygenOptions {
  std::filesystem::path topology;  // the topology file, without keys
  std::filesystem::path keys_dir;  // created (0700) when missing
  std::filesystem::path out;       // the keyed topology
};

// InputError when the topology already has keys, a key file exists, or the keys cannot be
// added to the file's text; IoError when a file cannot be written. Nothing is written unless
// every check passed.
void make_keys(const KeygenOptions& options);

}  // namespace sgp::launch
