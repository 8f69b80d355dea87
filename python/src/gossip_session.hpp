#pragma once
// The gossip of one peer without sgp's trainer: for a training loop that lives elsewhere (the
// Python package, python/README.md). It sets up what `sgp peer` sets up for gossip (topology,
// mixing schedule, ZeroMQ transport with fault injection and CURVE, the engine of the algorithm,
// the monitor's snapshot channel) and mixes a caller's buffer of DE-BIASED parameters z in
// place: the engine keeps its own x (the push-sum numerator) and w, and each round turns z into
// x = w z, mixes, and writes z = x / w back (asgp's engine works on z itself). With w = 1, as on
// every doubly stochastic schedule, the round trip is a copy and z comes back bit for bit.
//
// The caller's buffer lives in host memory or on a GPU (BufferPlace); the engine's backend is
// chosen by where the first buffer is, and every later buffer must be in the same place.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "sgp/compute/backend.hpp"
#include "sgp/config/train_config.hpp"
#include "sgp/gossip/push_sum_config.hpp"

namespace sgp::bridge {

// Where a caller's buffer is: host memory, or CUDA device `device_index`.
struct BufferPlace {
  compute::DeviceKind kind = compute::DeviceKind::cpu;
  int device_index = 0;
  bool operator==(const BufferPlace&) const = default;
};

// The settings and rank a process started by `sgp launch -- COMMAND` (or torchrun, Slurm) finds
// in its environment: $SGP_CONFIG (the run's config.json: every setting), $SGP_TOPOLOGY (the
// topology file; overrides config.json's), $SGP_RUN_DIR, $SGP_MONITOR, $SGP_KEYS,
// $SGP_RUN_CREDENTIALS, and the rank from $RANK (or $SLURM_PROCID). InputError naming the variable
// when one is missing or wrong.
struct SessionStart {
  config::TrainConfig config;
  int rank = 0;
};
SessionStart session_start_from_environment();

// One thread at a time: a call while another thread is inside one throws InputError.
class GossipSession {
 public:
  // Peer `rank` of config.topology, mixing vectors of `numel` floats (every peer's must be the
  // same). Validates the settings (InputError naming the setting), binds this peer's endpoint
  // (IoError when that fails).
  GossipSession(config::TrainConfig config, int rank, std::size_t numel);
  ~GossipSession();
  GossipSession(const GossipSession&) = delete;
  GossipSession& operator=(const GossipSession&) = delete;

  // Makes z (numel floats at `place`) the engine's own x, so that steps mix it without the two
  // copies (z into the engine's x and back) of other buffers; with w = 1, as on doubly
  // stochastic schedules, nothing but the engine touches it then. Before the first step; every
  // later step must pass z, and z must stay valid until finish().
  void attach(float* z, const BufferPlace& place);
  // After each optimizer step: z holds numel de-biased parameters at `place`, in and out. Runs a
  // gossip round when this is a gossip iteration (--gossip-every) and returns whether it did.
  // InputError when `place` differs from the first step's; IoError when a peer fails.
  bool step(float* z, const BufferPlace& place);
  // Hands z of `iteration` to the run's consensus monitor (best effort, never blocks); nothing
  // without a monitor. Returns whether it was queued.
  bool publish(const float* z, const BufferPlace& place, std::int64_t iteration);
  // Around a long pause of the training loop (an evaluation): asgp tells the peers that push to
  // this one that it pauses (they keep their pushes) and, at resume, that it mixes again; without
  // it they push into a peer that does not mix, and their own steps count for little meanwhile
  // (docs/asynchronous.md). stay_heard() during a pause longer than half --timeout-ms keeps their
  // failure detectors hearing from this one. The other algorithms do nothing; so does a call
  // before the first step or after close.
  void pause();
  void resume();
  void stay_heard();
  // Ends the gossip: sync modes apply what is still in flight; asgp says it is done and mixes
  // until every live peer is (its done/leave protocol). With `z`, writes the final z there.
  // Then closes the transport (the endpoint is free again); the accessors report the final
  // values, later steps are refused and later calls do nothing.
  void finish(float* z = nullptr, const std::optional<BufferPlace>& place = std::nullopt);

  int rank() const { return rank_; }
  int world_size() const;
  std::size_t numel() const { return numel_; }
  const config::TrainConfig& config() const { return config_; }
  std::int64_t iteration() const { return iteration_; }
  bool finished() const { return finished_; }
  // Whether this peer communicates at all (false for --algo local or a one-peer topology).
  bool communicates() const;
  double weight() const;
  gossip::PushSumMetrics metrics() const;
  // asgp: the ranks this peer excluded (or learnt were excluded) as failed, in order.
  std::vector<int> excluded_peers() const;
  // Snapshots the monitor did not take (it was slow or gone).
  std::uint64_t dropped_snapshots() const;

 private:
  struct State;
  // The engine's x starts as z (the caller's buffer at `place`), or is `attached` itself.
  void start_engine(const float* z, const BufferPlace& place, float* attached = nullptr);

  config::TrainConfig config_;
  int rank_;
  std::size_t numel_;
  std::int64_t iteration_ = 0;
  bool finished_ = false;
  bool failed_ = false;        // a step threw IoError: the engine may only be destroyed
  float* attached_ = nullptr;  // attach()'s buffer
  mutable std::mutex busy_;    // held by the call in progress (one thread at a time)
  std::unique_ptr<State> state_;
};

}  // namespace sgp::bridge
