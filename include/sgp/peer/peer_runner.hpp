#pragma once
// One SGP peer process from start to end: topology file -> mixing schedule -> ZeroMQ transport
// -> data shard -> Trainer, writing peer-<rank>.jsonl and peer-<rank>-summary.json into the run
// directory (and config.json from rank 0).
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "sgp/config/train_config.hpp"
#include "sgp/gossip/zmq_peer.hpp"
#include "sgp/run/summaries.hpp"
#include "sgp/transport/shm_transport.hpp"

namespace sgp::topology {
class Schedule;
}
namespace sgp::transport {
class FaultyTransport;
class Transport;
}  // namespace sgp::transport

namespace sgp::peer {

// The rank of this process: `flag` when given, else $RANK, else $SLURM_PROCID. InputError when
// none is set or one is not a number.
int resolve_rank(std::optional<int> flag);

// This peer's place among its host's peers, which picks its GPU with --device auto|cuda on a
// host with several (compute::gpu_index): $LOCAL_RANK (torchrun, Slurm wrappers) when set, else
// the number of lower ranks whose endpoint is on the same host as `rank`'s. InputError when
// $LOCAL_RANK is not a non-negative integer.
int local_peer_index(const topology::Schedule& schedule, int rank);

// The run credentials of `rank` rejoining a launched run by hand (sgp peer --join without
// --run-credentials): its share in config.run_dir, while the launcher keeps it there; else "".
std::string rejoining_credentials(const config::TrainConfig& config, int rank);

// Reads config.topology (InputError naming the file and every problem in it).
topology::Schedule load_topology(const config::TrainConfig& config);

// InputError when `rank` is not a rank of the topology file's schedule, or $WORLD_SIZE (set by
// torchrun and Slurm) is not its number of peers.
void check_rank(const config::TrainConfig& config, const topology::Schedule& file_schedule,
                int rank);

// The schedule the peers mix with: config.algo's weights over the file's graph, with
// --self-weight where it applies (config::mixing_schedule).
topology::Schedule peer_mixing_schedule(const config::TrainConfig& config,
                                        const topology::Schedule& file_schedule);

// A peer's transport: ZeroMQ wired from the mixing schedule, with the local fast path to peers
// of this host (shared memory) unless --no-local-fast-path, behind fault injection when
// --inject asks for it.
struct PeerTransport {
  std::unique_ptr<transport::ZmqTransport> zmq;
  std::unique_ptr<transport::ShmTransport> shm;        // unless --no-local-fast-path
  std::unique_ptr<transport::FaultyTransport> faulty;  // only with --inject

  PeerTransport();
  PeerTransport(PeerTransport&&) noexcept;
  PeerTransport& operator=(PeerTransport&&) noexcept;
  ~PeerTransport();
  // What the engine sends and receives through (null when nothing was opened).
  transport::Transport* active() const;
  // What went through shared memory (zeros without the fast path).
  transport::ShmStats shm_stats() const;
  // Writes what this transport carried into `summary` (shm_bytes, zmq_bytes, ...); nothing when
  // no transport was opened.
  void add_traffic(run::PeerSummary& summary) const;
};

// Opens peer `rank`'s transport for push-sum messages of `parameters` floats, with the
// settings' timeout, --local-ipc and --inject, secured by `secure` (security(config)).
PeerTransport open_peer_transport(const config::TrainConfig& config,
                                  const topology::Schedule& mixing, int rank,
                                  std::size_t parameters, const gossip::Security& secure);
// The same for an engine of `mode` rather than config.algo's (sgp consensus, whose --mode picks
// it): the one transport set-up of every process that gossips.
PeerTransport open_peer_transport(const config::TrainConfig& config,
                                  const topology::Schedule& mixing, int rank,
                                  std::size_t parameters, const gossip::Security& secure,
                                  gossip::Mode mode);

// Runs peer `rank` to the end; returns its summary. Rank 0 writes config.json when
// `write_config` (not when the settings came from the run's own config.json). `join`: asgp
// only, join a run in progress (a rank that died or never started) instead of starting it.
run::PeerSummary run_peer(const config::TrainConfig& config, int rank, bool write_config = true,
                          bool join = false);

}  // namespace sgp::peer
