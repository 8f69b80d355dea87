#pragma once
// The local fast path (--local-fast-path, on by default): a Transport over a ZmqTransport that
// moves the payloads for peers of this host through shared memory instead of the kernel
// (docs/transport.md).
//
// For a destination on this host (ZmqTransport::same_host_destinations()), send() copies the
// payload into that edge's ring (shm_ring.hpp), releases the caller's payload at once, and
// sends over the ZeroMQ connection a message [descriptor + header, empty frame]: the ring's
// name, token, position and length, followed by the unchanged header. Everything the ZeroMQ
// transport guarantees holds as before, because the descriptor travels where the payload
// would have: ordering, CURVE/PLAIN authentication (a descriptor is only believed from the rank
// it is authenticated as), send timeouts, and a peer killed mid-transfer (its descriptor never
// arrives, and the failure detector sees what it would see on TCP). When the ring has no room
// (the receiver holds more than a ring of payloads), the message goes over ZeroMQ as it is:
// waiting for room could deadlock two peers that push to each other, and ZeroMQ's queues
// already bound what waits.
//
// receive() hands a descriptor's payload to the engine as a view into the ring (the engine
// checks its checksum as for any payload); dropping the message gives the bytes back. A
// descriptor that fails any check (ShmRefusal) is counted and dropped, never read. Messages
// that are not descriptors pass through untouched.
#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "sgp/transport/shm_ring.hpp"
#include "sgp/transport/transport.hpp"
#include "sgp/transport/zmq_transport.hpp"

namespace sgp::transport {

struct ShmOptions {
  std::size_t ring_bytes = std::size_t{8} << 20;  // each outgoing edge's ring
  // Smaller payloads (control notices, tiny chunks) go over ZeroMQ: a ring saves nothing there,
  // and a peer that only ever sends those to a rank needs no ring for it.
  std::size_t min_payload_bytes = 16384;
};

struct ShmStats {
  std::uint64_t shm_bytes = 0;        // payload bytes sent through rings
  std::uint64_t shm_messages = 0;     // ... in this many messages
  std::uint64_t inline_messages = 0;  // to a peer of this host, over ZeroMQ: its ring was full
  std::array<std::uint64_t, kShmRefusals> refused{};  // descriptors refused, by ShmRefusal
  std::uint64_t refused_total() const;
};

class ShmTransport final : public Transport {
 public:
  // `inner` must outlive this transport. Logs the ranks it takes the fast path to. At
  // destruction, a ring whose receiver has not attached yet is kept for up to inner's linger
  // (as long as a descriptor may still be delivered), then unlinked.
  explicit ShmTransport(ZmqTransport& inner, ShmOptions options = {});
  ~ShmTransport() override;

  int rank() const override { return inner_.rank(); }
  void send(int dest, std::span<const std::byte> header, std::span<const std::byte> payload,
            ReleaseFn on_release) override;
  std::optional<Message> receive(std::chrono::milliseconds timeout) override;
  void wake() override { inner_.wake(); }
  void discard_pending(int dest) override;
  void release_peer(int peer) override;

  ShmStats stats() const;
  const std::set<int>& local_destinations() const { return local_; }

 private:
  ShmRingWriter* writer_for(int dest);        // null: no ring to dest (not local, or failed)
  std::optional<Message> resolve(Message m);  // a descriptor's payload, or nothing (refused)
  void count_refusal(ShmRefusal why, const Message& m);

  ZmqTransport& inner_;
  ShmOptions options_;
  std::set<int> local_;  // destinations of this host still on the fast path
  std::map<int, std::unique_ptr<ShmRingWriter>> writers_;
  std::map<int, std::shared_ptr<ShmRingReader>> readers_;  // by sender
  std::vector<std::byte> frame_;                           // the descriptor + header being sent
  mutable std::mutex stats_mutex_;                         // stats() may run on another thread
  ShmStats stats_;
};

// Removes the rings that processes of this user which no longer exist left in /dev/shm (a peer
// killed before its receiver attached); returns how many. Names carry the creator's pid.
int remove_stale_rings();

}  // namespace sgp::transport
