#pragma once
// A sweep: a grid of training runs read from a TOML file (experiments/*.toml), expanded into one
// point per combination of the grid's values. Pure: parsing, validation and expansion only
// (`sgp sweep` in src/cli/sweep_command.cpp runs the points).
//
//   name = "topology-sweep"            # results go to <results>/<name>/<point>/
//   description = "..."                # optional, free text
//   [grid]                             # every list is optional; the default is shown
//   topology = ["one-peer-exponential"] # kinds (`sgp topology generate` names) or DOT files
//                                       # (paths relative to the sweep file)
//   peers = [8]                         # N (ignored for files, which fix N)
//   self_weight = [0.0]                 # mixing rate a in (0, 1); 0: the topology's weights
//   algo = ["sgp"]                      # sgp | osgp | dpsgd | local | exact
//   gossip_every = [1]                  # H
//   partition = ["iid"]                 # iid | dirichlet:ALPHA | shards:K
//   seed = [0]
//   [grid.topology_for_algo]            # optional: these algos use these topologies instead
//   dpsgd = ["bidirectional-ring"]      #   of grid.topology (dpsgd needs an undirected graph,
//   exact = ["complete"]                #   exact a complete one)
//   [train]                             # fixed settings: any TrainConfig field below
//   epochs = 1.0
//   [quick]                             # with --quick: these replace [train]'s values
//   epochs = 0.25
//
// [train] / [quick] keys: model (a --model value), hidden (list of widths: the same as
// model = "mlp:W1,..."), data_dir, epochs, max_iterations,
// batch_size, lr, lr_scaling, warmup_epochs, lr_decay, lr_milestones, lr_gamma, momentum,
// nesterov, weight_decay, device, blas_threads, tf32, tau, timeout_ms, log_every, eval_every
// (epochs), log_level.
//
// Every problem (TOML syntax, unknown key, wrong type, empty list, value out of range) is an
// InputError "FILE:LINE:COLUMN: KEY: what was expected".
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "sgp/peer/train_config.hpp"

namespace sgp::peer {

struct SweepPoint {
  // A topology kind name, or a DOT file path (absolute, or as resolved against the sweep file).
  std::string topology;
  bool topology_is_file = false;
  int peers = 0;             // for a file: 0 (the file decides)
  double self_weight = 0.0;  // 0: the topology's own weights
  std::string algo;
  int gossip_every = 1;
  std::string partition = "iid";
  std::uint64_t seed = 0;
  // Every training setting of the run; `topology`, `run_dir` and `monitor` are left empty for
  // the runner to fill.
  TrainConfig config;

  // Readable and unique within a sweep, usable as a directory name:
  // "<topology>_n<N>_a<a|uniform>_<algo>_h<H>_s<seed>[_<partition>]", e.g.
  // "one-peer-exponential_n8_a0.5_sgp_h1_s0" or "ring_n8_auniform_sgp_h1_s0_dirichlet0.1" (a
  // file topology contributes its stem; the partition, without its colon, when not iid).
  std::string name() const;
};

struct SweepSpec {
  std::string name;
  std::string description;
  std::filesystem::path source;  // the file it was read from (for messages and relative paths)
  // The expanded grid, in the order of the file's lists: algo outermost, then topology, peers,
  // self_weight, gossip_every, partition, seed. A topology file gives one point for its own N, not
  // one per grid.peers value. dpsgd, exact and local ignore self_weight (they choose their own
  // weights or do not mix): one point each with self_weight 0, not one per value.
  std::vector<SweepPoint> points;
};

// Parses TOML text. `source` names the text in messages and anchors relative topology paths.
// `quick`: apply the [quick] table over [train].
SweepSpec parse_sweep_spec(std::string_view text, const std::filesystem::path& source, bool quick);
// Reads the file (InputError when it cannot be read) and parses it.
SweepSpec read_sweep_file(const std::filesystem::path& path, bool quick);

}  // namespace sgp::peer
