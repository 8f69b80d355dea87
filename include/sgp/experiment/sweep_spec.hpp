#pragma once
// A sweep: a grid of training runs read from a TOML file (experiments/*.toml), expanded into one
// point per combination of the grid's values. Pure: parsing, validation and expansion only
// (sweep_runner.hpp runs the points).
//
//   name = "topology-sweep"            # results go to <results>/<name>/<point>/
//   description = "..."                # optional, free text
//   [grid]                             # every list is optional; a single value is a list of one
//   topology = ["one-peer-exponential"] # kinds (`sgp topology generate` names) or DOT files
//                                       # (paths relative to the sweep file; they fix N), or
//                                       # {kind = "ring", peers = 6}: a kind with its own N
//   peers = [8]                         # N (for kinds without their own; files fix theirs)
//   algo = ["sgp"]                      # any training setting may be a grid axis, e.g.
//   self_weight = [0.0]                 #   the mixing rate a (0: the topology's weights),
//   gossip_every = [1]                  #   H,
//   seed = [0]                          #   the seed, lr, batch_size, ...
//   [grid.topology_for_algo]            # optional: these algos use these topologies instead
//   dpsgd = ["bidirectional-ring"]      #   of grid.topology (dpsgd needs an undirected graph,
//   exact = ["complete"]                #   exact a complete one)
//   [train]                             # fixed settings (the settings table's keys)
//   epochs = 1.0
//   [quick]                             # with --quick: these replace [train]'s values
//   epochs = 0.25
//
// Settings the runner decides (topology, run_dir, monitor, resume) cannot be set. Every problem
// (TOML syntax, unknown key, wrong type, empty list, value out of range) is an InputError
// "FILE:LINE:COLUMN: KEY: what was expected".
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sgp/config/train_config.hpp"

namespace sgp::experiment {

struct SweepPoint {
  // A topology kind name, or a DOT file path (absolute, or as resolved against the sweep file).
  std::string topology;
  bool topology_is_file = false;
  int peers = 0;  // for a file: the file's N
  // Every training setting of the run, grid values included; `topology`, `run_dir` and
  // `monitor` are left empty for the runner to fill.
  config::TrainConfig config;
  // Grid axes beyond algo, self_weight, gossip_every and seed (they name the point too).
  std::vector<std::string> other_axes;
  // command = "simulate" (src/experiment/simulate_sweep.hpp): the options of its
  // `sgp simulate` (topology and peers included; other_axes are its grid keys after those);
  // null for a launch point.
  nlohmann::json simulate = {};
  // A kind's --degree from a topology table {kind = "base", degree = 2}; 0: the kind's default.
  int topology_degree = 0;

  // Readable and unique within a sweep, usable as a directory name:
  // "<topology label>_n<N>_a<a|uniform>_<algo>_h<H>_s<seed>[_<key>-<value>...]", e.g.
  // "one-peer-exponential_n8_a0.5_sgp_h1_s0" (a file topology contributes its stem).
  std::string name() const;
  // The topology part of the name: the kind ("base-k2" with a degree) or the file's stem.
  std::string topology_label() const;
};

struct SweepSpec {
  std::string name;
  std::string description;
  std::filesystem::path source;    // the file it was read from (for messages and relative paths)
  std::string command = "launch";  // or "simulate": what each point runs
  // The expanded grid: algo outermost, then topology, peers, self_weight, gossip_every, seed,
  // then the other axes in the file's order. A topology file gives one point for its own N.
  // Algorithms that do not use self_weight (the algorithm table says which) get one point with
  // self_weight 0, not one per value.
  std::vector<SweepPoint> points;
};

// Parses TOML text. `source` names the text in messages and anchors relative topology paths.
// `quick`: apply the [quick] table over [train].
SweepSpec parse_sweep_spec(std::string_view text, const std::filesystem::path& source, bool quick);
// Reads the file (InputError when it cannot be read) and parses it.
SweepSpec read_sweep_file(const std::filesystem::path& path, bool quick);

}  // namespace sgp::experiment
