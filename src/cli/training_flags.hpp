#pragma once
// The training flags shared by `sgp train`, `sgp peer` and `sgp launch`.
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace sgp::peer {
struct TrainConfig;
}

namespace sgp::cli {

void add_training_flags(CLI::App& command, peer::TrainConfig& config);

// The flags of a peer of a multi-peer run (topology, algorithm, gossip, checkpoints, monitor).
void add_peer_flags(CLI::App& command, peer::TrainConfig& config);

// --keys DIR and --insecure (peer, launch, consensus, monitor).
void add_security_flags(CLI::App& command, std::string& keys_dir, bool& insecure,
                        const std::string& group);

// The command-line flags that make `add_training_flags` + `add_peer_flags` reproduce `config`
// (how `sgp launch` hands its settings to the peers it starts).
std::vector<std::string> training_arguments(const peer::TrainConfig& config);

}  // namespace sgp::cli
