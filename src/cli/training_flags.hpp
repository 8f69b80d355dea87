#pragma once
// The training flags shared by `sgp train`, `sgp peer` and `sgp launch`.
namespace CLI {
class App;
}

namespace sgp::peer {
struct TrainConfig;
}

namespace sgp::cli {

void add_training_flags(CLI::App& command, peer::TrainConfig& config);

}  // namespace sgp::cli
