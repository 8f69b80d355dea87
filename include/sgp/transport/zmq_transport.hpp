#pragma once
// The ZeroMQ transport, one per peer process. zmq.hpp is included only by the transport's .cpp
// files (this one and snapshot_channel.cpp).
//
// Sockets. Each peer binds ONE PULL socket at its own endpoint and connects one PUSH socket to
// every rank it may ever push to. PULL rather than ROUTER because gossip traffic is one-way
// (nothing is ever answered), PULL fair-queues all senders into one inbox, and ROUTER's identity
// frame would prove nothing anyway: the sender is named in the (validated) message header, and
// authenticity is a job for CURVE, not for socket identities. One PUSH socket per destination,
// not one shared one, because a shared PUSH would round-robin between peers instead of addressing
// one.
//
// Zero copy. send() copies the small header frame and hands the payload frame to ZeroMQ with
// zmq_msg_init_data and a free callback: ZeroMQ writes the caller's buffer straight to the
// kernel, and the callback (run by ZeroMQ's I/O thread once the bytes are written, or when the
// message is dropped) is the caller's on_release. Received frames are not copied either.
//
// Settings, chosen on purpose (ReceiveLimits: required, since only the caller knows the sizes;
// ZmqOptions):
//   MAXMSGSIZE       on the PULL socket: a frame bigger than the largest the caller expects
//                    drops the sender's connection before ZeroMQ allocates it (a 400 MB frame
//                    used to cost the receiver 400 MB).
//   RCVHWM           messages queued per incoming connection before ZeroMQ stops reading it:
//                    memory per connection is about RCVHWM x the largest frame, so the caller
//                    sizes it to one round of messages (the senders' queues hold the rest).
//   SNDHWM           messages queued per outgoing link. A push-sum round is at most 256 chunk
//                    messages per link and a peer is at most tau + 1 rounds ahead; a round must
//                    fit in SNDHWM + RCVHWM or two peers that push to each other could both block
//                    in send(). The sender's queue holds pointers to its own buffers (zero copy).
//   SNDTIMEO         how long send() may block on a full queue before IoError (peer not reading).
//   LINGER           on close, how long queued messages still get to be delivered: a peer that
//                    finishes must still deliver its last round to neighbours that need it.
//   CURVE            with ZmqOptions::curve (keys in the topology), the PULL socket is a CURVE
//                    server admitting only the configured client keys (ZapHandler) and every
//                    PUSH a CURVE client; received messages carry the authenticated rank.
//   PLAIN            with ZmqOptions::plain (a keyless run on one host, per-run passwords:
//                    plain.hpp), the same admission and rank tagging without encryption.
//   local_ipc        (ZmqOptions, on by default) a PULL bound at tcp://HOST:PORT also listens at
//                    ipc://@sgp-HOST-PORT (a Unix socket in Linux's abstract namespace, which
//                    belongs to the network namespace: no file, nothing left behind, not
//                    reachable from another host or emulated host), and a connect to a
//                    tcp endpoint on this host (a loopback address, or the host this transport
//                    is bound to) goes there instead: peers of one host skip the TCP stack.
//                    CURVE works the same over it (the mechanism does not depend on the
//                    transport). Off: plain TCP everywhere.
//   IMMEDIATE = 0    (the default, kept) messages to a peer that has not started yet are queued
//                    and delivered when it comes up; peers may start in any order.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "sgp/transport/curve.hpp"
#include "sgp/transport/plain.hpp"
#include "sgp/transport/transport.hpp"

namespace sgp::transport {

// What the receiving socket accepts. No defaults: every receiver must say (sgp peer once had
// no frame limit because nobody passed one).
struct ReceiveLimits {
  std::int64_t max_frame_bytes;  // ZMQ_MAXMSGSIZE, > 0
  int max_queued_messages;       // ZMQ_RCVHWM per connection, > 0
};

// CURVE for a peer's transport: this peer's keypair (its PULL is a server with it, each PUSH a
// client with it), the in-neighbours it admits (public key -> rank), and each destination's
// public key.
struct ZmqCurve {
  CurveKeyPair own;
  std::map<std::string, int> admitted;
  std::map<int, std::string> server_keys;
};

// PLAIN for a peer's transport: the senders its PULL admits, and the password it presents to
// each destination (its user name is its rank).
struct ZmqPlain {
  PlainServer server;
  std::map<int, std::string> passwords;
};

struct ZmqOptions {
  int io_threads = 1;
  int send_hwm = 1024;
  std::chrono::milliseconds send_timeout{30000};
  std::chrono::milliseconds linger{5000};
  std::optional<ZmqCurve> curve =
      {};  // none: plain TCP (the caller decides whether that is allowed)
  std::optional<ZmqPlain> plain = {};  // without curve: PLAIN, authenticated but not encrypted
  bool local_ipc = true;               // peers on this host connect over ipc:// (above)
  // A socket already listening at the bind endpoint's port, which the PULL socket takes over
  // instead of binding (handed_listener.hpp); -1: bind.
  int listen_fd = -1;
};

// The ipc:// endpoint a PULL bound at tcp endpoint `tcp` also listens at ("" when `tcp` is not
// tcp://HOST:PORT with a numeric port), e.g. "ipc://@sgp-127.0.0.1-5600".
std::string local_ipc_endpoint(const std::string& tcp);

class ZmqTransport final : public Transport {
 public:
  // Binds the PULL socket at `bind_endpoint` (e.g. "tcp://127.0.0.1:5600", or ":*" for a port
  // chosen by the OS; endpoint() tells which). Throws IoError if the endpoint cannot be bound.
  ZmqTransport(int rank, const std::string& bind_endpoint, ReceiveLimits limits,
               ZmqOptions options = {});
  ~ZmqTransport() override;

  // The endpoint actually bound (ZMQ_LAST_ENDPOINT), e.g. "tcp://127.0.0.1:41233".
  const std::string& endpoint() const { return endpoint_; }
  // Connects a PUSH socket to `dest`'s endpoint (once per destination). With CURVE, `dest` must
  // have a server key in the options.
  void connect(int dest, const std::string& endpoint);

  // The connected ranks whose endpoint is on this host: ipc://, a loopback address, or the host
  // this transport is bound to (what ShmTransport takes its fast path to).
  const std::set<int>& same_host_destinations() const { return same_host_; }
  // How long queued messages still get to be delivered when the transport closes.
  std::chrono::milliseconds linger() const { return options_.linger; }
  // Bytes of every message queued by send() so far (header and payload frames): what this peer
  // sent through ZeroMQ. Safe to read while another thread sends.
  std::uint64_t bytes_sent() const { return bytes_sent_.load(std::memory_order_relaxed); }

  int rank() const override { return rank_; }
  void send(int dest, std::span<const std::byte> header, std::span<const std::byte> payload,
            ReleaseFn on_release) override;
  std::optional<Message> receive(std::chrono::milliseconds timeout) override;
  void wake() override;
  void discard_pending(int dest) override;

 private:
  bool wait_readable(std::chrono::milliseconds timeout);  // false: woken or timed out
  std::optional<Message> read_message();                  // a whole message, if one is there
  void bind_local_ipc();

  struct Sockets;  // zmq context, ZAP handler and sockets, kept out of this header
  int rank_;
  ZmqOptions options_;
  std::unique_ptr<Sockets> sockets_;
  std::string endpoint_;
  std::string bound_host_;  // HOST of the bound tcp://HOST:PORT ("" for other transports)
  std::set<int> same_host_;
  std::set<int> discarded_;
  int wake_fd_ = -1;  // eventfd polled beside the PULL socket
  std::atomic<std::uint64_t> bytes_sent_{0};
};

}  // namespace sgp::transport
