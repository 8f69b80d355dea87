#pragma once
// Every setting of a training run, as plain data. What each field means, its flag, config.json
// key, sweep key, allowed values and help text are declared once, in the settings table
// (sgp/config/settings.hpp); this struct only holds the values and their defaults.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "sgp/config/algorithm.hpp"
#include "sgp/log.hpp"
#include "sgp/model/lr_schedule.hpp"

namespace sgp::config {

// What sgp launch does when one of its peers dies.
enum class PeerFailure {
  automatic,  // continue for the fault-tolerant algorithms (asgp), stop for the others
  go_on,      // "continue": the others go on (they exclude the dead peer if they can)
  stop,       // stop every peer
};
std::span<const NamedValue<PeerFailure>> names(PeerFailure);

// What the momentum buffer follows (--momentum-kind; sgp/optim/update_rule.hpp): the local
// stochastic gradient, or the change of the de-biased mixed model (Lin et al., ICML 2021).
enum class MomentumKind { local, quasi_global };
std::span<const NamedValue<MomentumKind>> names(MomentumKind);

// What a run's length counts (--work): a fixed number of iterations per peer, or a budget of
// samples over all peers together that fast peers take more of (asgp, agt: docs/asynchronous.md).
enum class Work { per_peer, budget };
std::span<const NamedValue<Work>> names(Work);

struct TrainConfig {
  // model and data
  std::string model = "mlp:512,512";  // sgp/model/model_spec.hpp; input and classes from the data
  std::string partition = "iid";      // iid | dirichlet:ALPHA | shards:K (sgp/data/partition.hpp)
  std::string data_dir;               // empty: $SGP_DATA_DIR or the Debian package's path
  std::uint64_t seed = 0;             // model initialisation, partition and batch order
  // optimisation
  double epochs = 1.0;
  std::int64_t max_iterations = 0;  // > 0: stop after this many iterations (short runs)
  int batch_size = 32;              // per peer
  // lr is the rate for a global batch of 256, scaled linearly to batch * peers (Goyal et al.);
  // lr 0.1 with Nesterov 0.9 unscaled diverges at batch 32.
  double lr = 0.1;
  model::LrScaling lr_scaling = model::LrScaling::linear;
  double warmup_epochs = 0.0;
  model::LrDecay lr_decay = model::LrDecay::cosine;
  std::vector<double> lr_milestones;  // epochs, for step decay
  double lr_gamma = 0.1;
  float momentum = 0.9f;
  bool nesterov = true;
  float weight_decay = 1e-4f;
  MomentumKind momentum_kind = MomentumKind::local;
  // compute
  std::string device = "auto";
  int blas_threads = 1;
  bool tf32 = false;
  // peers and gossip (sgp peer / sgp launch)
  std::string topology;  // DOT file
  Algorithm algo = Algorithm::sgp;
  int tau = 1;                       // osgp: staleness bound in rounds
  std::string comm_thread = "auto";  // osgp: on | off | auto (the engine's comm_thread)
  // 16-bit payloads, or compressed differences with a consensus step gamma (0: the default)
  gossip::PayloadCompression compress;
  double consensus_step = 0.0;
  gossip::Robust robust = gossip::Robust::none;  // clip in-neighbours' models (ClippedGossip)
  int gossip_every = 1;                          // H: gossip once every H iterations
  int global_average_every = 0;  // > 0: every this many iterations an exact average (Gossip-PGA)
  double slow_momentum = 0.0;    // > 0: SlowMo's outer momentum at each exact average
  double self_weight = 0.0;      // > 0: mixing rate a overriding the file's weights
  int timeout_ms = 30000;        // a missing peer's message fails the run after this
  std::int64_t checkpoint_every = 0;  // iterations; 0: no checkpoints
  bool resume = false;                // continue from the newest complete checkpoint set
  std::string monitor;                // endpoint of the consensus monitor; empty: none
  std::string keys_dir;               // CURVE secret keys (`sgp keygen`); empty: none
  bool insecure = false;              // no per-run credentials; plain TCP beyond loopback
  // Not a setting (no row in the table, never in config.json): the file of this process's
  // per-run credentials that sgp launch hands to the peers it starts (--run-credentials).
  std::string run_credentials;
  bool local_ipc = true;        // peers of one host exchange over ipc:// instead of TCP loopback
  bool local_fast_path = true;  // payloads to peers of this host through shared memory
  std::string link_rate;  // sgp launch: emulated hosts with this egress limit (config/link_rate)
  // fault tolerance (asgp)
  bool running_sums = true;   // asgp: lost messages cost no mass (false: plain push-sum)
  bool acked_pushes = true;   // asgp: pushes kept until acknowledged (false: running sums)
  double partner_wait = 2.0;  // asgp: longest wait for in-neighbours that keep pace, in rounds
                              // (1 until 2026-11-29: docs/asynchronous.md)
  std::string inject;  // transport faults, e.g. "drop=0.05,seed=1" (transport/faulty_transport)
  PeerFailure on_peer_failure = PeerFailure::automatic;  // what sgp launch does when a peer dies
  int sign_flip_rank = -1;     // attack simulation: this rank pushes -x (-1: none)
  bool leave_on_term = false;  // asgp: SIGTERM hands this peer's mass to a neighbour, exits 0
  std::string straggler;       // "RANK:FACTOR": that rank's steps take FACTOR times as long
  Work work = Work::per_peer;  // budget: the run ends when all peers together spent the samples
  // reporting
  std::string run_dir;          // empty: runs/<command>-<timestamp>
  bool overwrite = false;       // delete an earlier run's results in run_dir first
  std::int64_t log_every = 50;  // iterations between JSONL records
  double eval_every = 0.25;     // epochs between test evaluations (and at the end)
  bool final_eval = true;       // false: no peer evaluates its final model (the monitor's does)
  LogLevel log_level = LogLevel::info;

  bool operator==(const TrainConfig&) const = default;
};

// config.json's settings: every setting of the table, keyed by its name.
void to_json(nlohmann::json& j, const TrainConfig& c);

}  // namespace sgp::config
