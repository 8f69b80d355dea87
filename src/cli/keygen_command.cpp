// `sgp keygen`: CURVE keys for a topology (sgp/launch/keygen.hpp).
#include <CLI/CLI.hpp>

#include <memory>

#include "commands.hpp"
#include "sgp/launch/keygen.hpp"
#include "sgp/log.hpp"

namespace sgp::cli {

void add_keygen_command(CLI::App& app) {
  auto o = std::make_shared<launch::KeygenOptions>();
  CLI::App* cmd = app.add_subcommand(
      "keygen",
      "Make CURVE keys for a topology: <keys>/peer-<rank>.key (secret, mode 0600) and .pub for "
      "every rank, <keys>/monitor.key and .pub, and --out: the topology with each node's "
      "public_key and the graph's monitor_public_key. Peers, launch, consensus and monitor then "
      "take --keys DIR: every connection is authenticated and encrypted. Existing keys are never "
      "overwritten.");
  cmd->add_option("--topology", o->topology, "the topology file (without keys)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--keys", o->keys_dir, "directory for the key files (created, mode 0700)")
      ->required();
  cmd->add_option("--out", o->out, "where to write the keyed topology")->required();
  cmd->callback([o] {
    configure_logging(-1, LogLevel::info);
    launch::make_keys(*o);
  });
}

}  // namespace sgp::cli
