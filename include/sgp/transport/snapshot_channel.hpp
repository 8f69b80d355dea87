#pragma once
// A one-way, best-effort channel for snapshots that must never slow the sender down: peers hand
// their de-biased parameters to the consensus monitor at evaluation points. The sender never
// blocks: when the monitor is slow, gone, or not started, the snapshot is dropped and counted.
// Frames are copied (snapshots are rare), so the caller may reuse its buffer at once.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "sgp/transport/curve.hpp"
#include "sgp/transport/message.hpp"
#include "sgp/transport/plain.hpp"

namespace sgp::transport {

class SnapshotSender {
 public:
  // Connects (lazily, as ZeroMQ does) to the monitor at `endpoint`, as a CURVE client when
  // `curve` is given, else as a PLAIN client when `plain` is. Throws InputError when the
  // endpoint is malformed.
  explicit SnapshotSender(const std::string& endpoint,
                          const std::optional<CurveClient>& curve = std::nullopt,
                          const std::optional<PlainClient>& plain = std::nullopt);
  ~SnapshotSender();
  SnapshotSender(const SnapshotSender&) = delete;
  SnapshotSender& operator=(const SnapshotSender&) = delete;

  // Queues [header, payload]; false when it was dropped instead. Never blocks, unless
  // `wait_for_monitor`: then it waits for a monitor not connected yet, as long as the socket
  // lingers at exit (2 s). A run's last snapshot waits: a run of a few milliseconds would
  // otherwise end before its connection does, and lose it.
  bool try_send(std::span<const std::byte> header, std::span<const std::byte> payload,
                bool wait_for_monitor = false);
  std::uint64_t dropped() const { return dropped_; }

 private:
  struct Socket;
  std::unique_ptr<Socket> socket_;
  std::uint64_t dropped_ = 0;
};

class SnapshotReceiver {
 public:
  // Binds at `endpoint` ("tcp://127.0.0.1:*" lets the OS choose the port; endpoint() tells), as
  // a CURVE server admitting only curve->admitted when `curve` is given (received messages then
  // carry the sender's authenticated rank), else as a PLAIN server admitting plain->admitted
  // when `plain` is given. Throws IoError when it cannot bind.
  explicit SnapshotReceiver(const std::string& endpoint,
                            const std::optional<CurveServer>& curve = std::nullopt,
                            const std::optional<PlainServer>& plain = std::nullopt);
  ~SnapshotReceiver();
  SnapshotReceiver(const SnapshotReceiver&) = delete;
  SnapshotReceiver& operator=(const SnapshotReceiver&) = delete;

  const std::string& endpoint() const { return endpoint_; }
  // The next snapshot's frames, or nothing within `timeout`.
  std::optional<Message> receive(std::chrono::milliseconds timeout);
  // Connections refused for their key or password (0 without authentication).
  std::uint64_t refused_connections() const;

 private:
  struct Socket;
  std::unique_ptr<Socket> socket_;
  std::string endpoint_;
  bool authenticated_ = false;
};

}  // namespace sgp::transport
