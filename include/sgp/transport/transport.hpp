#pragma once
// The abstract transport the gossip engine talks to: point-to-point pushes of two-frame messages
// (a small header, copied, and a payload, NOT copied) to a rank, and one inbox per rank.
//
// Backends: ZmqTransport (real peers, one process each; the only code that sees ZeroMQ) and
// InProcTransport (threads in one process, for unit tests). Expected outcomes are values (an
// empty std::optional when nothing arrived in time); failures are exceptions (IoError when a peer
// cannot be reached in time, InvariantError on misuse).
//
// Threading: one thread at a time may call send/receive/discard_pending on a transport; wake()
// may be called from any thread. Release callbacks run on any thread.
#include <chrono>
#include <cstddef>
#include <optional>
#include <span>

#include "sgp/transport/message.hpp"

namespace sgp::transport {

class Transport {
 public:
  virtual ~Transport() = default;
  Transport() = default;
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  virtual int rank() const = 0;

  // Queues [header, payload] for `dest`. The header is copied; the payload is not: the caller
  // keeps it alive and unmodified until `on_release` has run (exactly once, from any thread, even
  // when the message is dropped). A release never waits for the receiving application to read
  // the message (ZeroMQ releases once the bytes are in the kernel). Throws IoError if the message
  // cannot be queued within the backend's send timeout (the peer is gone or not reading);
  // on_release has then run or will.
  virtual void send(int dest, std::span<const std::byte> header, std::span<const std::byte> payload,
                    ReleaseFn on_release) = 0;

  // The next message from anyone, or std::nullopt when none arrived within `timeout` or wake()
  // was called. Never throws for what peers send: the frames are handed over as they are.
  virtual std::optional<Message> receive(std::chrono::milliseconds timeout) = 0;

  // Thread-safe: makes a receive() that is blocked now (or the next one) return early.
  virtual void wake() = 0;

  // Gives up on messages to `dest` that have not left this process yet (a peer declared dead):
  // they are dropped and their payloads released (asynchronously for ZeroMQ). Later sends to
  // `dest` throw IoError.
  virtual void discard_pending(int dest) = 0;

  // `peer` left the run for good: what this transport holds for it alone (a shared-memory ring
  // each way) may go. Unlike discard_pending, later sends to it still work (a rank that rejoins
  // is a new process, given new rings).
  virtual void release_peer(int /*peer*/) {}
};

}  // namespace sgp::transport
