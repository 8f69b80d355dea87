#pragma once
// Each subcommand of the `sgp` executable lives in its own <name>_command.cpp and registers
// itself here. A command's callback throws sgp::Error subclasses; main() turns them into one
// clear message and an exit status (2: bad input, 3: I/O failure, 4: internal error).
namespace CLI {
class App;
}

namespace sgp::cli {

void add_train_command(CLI::App& app);
void add_peer_command(CLI::App& app);
void add_launch_command(CLI::App& app);
void add_monitor_command(CLI::App& app);
void add_topology_command(CLI::App& app);
void add_consensus_command(CLI::App& app);
void add_sweep_command(CLI::App& app);
void add_keygen_command(CLI::App& app);
void add_summarize_command(CLI::App& app);
void add_simulate_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_emulate_command(CLI::App& app);

}  // namespace sgp::cli
