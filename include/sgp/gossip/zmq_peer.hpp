#pragma once
// Wiring one process's ZeroMQ sockets from the topology: a peer's transport (bind at its own
// endpoint, connect to every rank it may ever push to: the union of its out-neighbours over the
// period) and the monitor's snapshot channel, with the security the topology asks for:
//
//   - Keys in the topology (public_key attributes, `sgp keygen`): CURVE everywhere. A peer reads
//     <keys>/peer-<rank>.key, which must match its node's public_key; its PULL socket admits the
//     keys of its in-neighbours over the whole period; its PUSH sockets authenticate the
//     servers they connect to. The monitor reads <keys>/monitor.key (graph attribute
//     monitor_public_key) and admits every peer.
//   - No keys, with this run's credentials (gossip/run_credentials.hpp: sgp launch of every
//     rank on this host, sgp consensus --local): PLAIN, authenticated per (sender, receiver)
//     pair, not encrypted; loopback addresses only, as below.
//   - No keys: plain TCP, which anyone who can reach a port can talk to, so only on loopback
//     addresses, unless --insecure says otherwise (one warning line).
#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "sgp/gossip/push_sum_config.hpp"
#include "sgp/gossip/run_credentials.hpp"
#include "sgp/gossip/wire_format.hpp"
#include "sgp/topology/schedule.hpp"
#include "sgp/transport/curve.hpp"
#include "sgp/transport/zmq_transport.hpp"

namespace sgp::gossip {

// The --keys DIR and --insecure flags of sgp peer / launch / consensus / monitor.
struct Security {
  std::filesystem::path keys_dir;  // empty: none given
  bool insecure = false;
  std::optional<RunCredentials> credentials = {};  // a keyless run on one host (--run-credentials)
};

// The receive limits for push-sum messages of this chunking among `num_peers` peers. Sync and
// overlap: a frame at most one chunk of float32 (or one header), one round of messages (plus
// one) queued per incoming connection. Async: chunks of float64 totals, a mass transfer
// (weight, x and the membership table) in one frame, and a few control notices besides.
transport::ReceiveLimits push_sum_receive_limits(const Chunking& chunking, Mode mode = Mode::sync,
                                                 int num_peers = 0);

// Throws InputError when the schedule has no endpoints or the security flags do not fit the
// topology (keys without --keys, a key file that does not match, non-loopback endpoints without
// keys or --insecure), IoError when binding fails. Allreduce mode connects to rank + 1 and
// admits rank - 1 (mod N) only, whatever the edges. Async mode connects to (and admits) every
// rank: membership notices go to all, and a repaired schedule may push anywhere. `ring_too`
// (--global-average-every): rank + 1 and rank - 1 besides the schedule's neighbours.
// Async mode also caps options.linger at 1 s (a dead peer's queue must not hold the exit).
std::unique_ptr<transport::ZmqTransport> open_zmq_transport(const topology::Schedule& schedule,
                                                            int rank, const Chunking& chunking,
                                                            const Security& security,
                                                            transport::ZmqOptions options = {},
                                                            Mode mode = Mode::sync,
                                                            bool ring_too = false);

// The monitor's CURVE server (admitting every peer), or nothing for a plain one bound at
// `bind_endpoint` (allowed on loopback, or with --insecure). InputError as above.
std::optional<transport::CurveServer> monitor_curve(const topology::Schedule& schedule,
                                                    const Security& security,
                                                    const std::string& bind_endpoint);

// Peer `rank`'s CURVE client towards the monitor, or nothing when the topology has no keys.
// InputError when it has peer keys but no monitor_public_key.
std::optional<transport::CurveClient> snapshot_curve(const topology::Schedule& schedule, int rank,
                                                     const Security& security);

// Peer `rank`'s PLAIN client towards its launcher's monitor, or nothing when it has no run
// credentials with a password for the monitor.
std::optional<transport::PlainClient> snapshot_plain(int rank, const Security& security);

}  // namespace sgp::gossip
