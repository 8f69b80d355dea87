#pragma once
// Settings and metrics of the push-sum engine (PushSumEngine).
#include <array>
#include <chrono>
#include <cstdint>
#include <span>

#include "sgp/named_values.hpp"

#include "sgp/gossip/wire_format.hpp"

namespace sgp::gossip {

enum class Mode {
  sync,     // SGP: round k ends when every in-neighbour's round-k message is in
  overlap,  // OSGP: a communication thread sends/receives while the caller computes; bounded lag
};

std::span<const NamedValue<Mode>> names(Mode);

struct PushSumConfig {
  Mode mode = Mode::sync;
  // Overlap mode: round k may end while every in-neighbour's messages of rounds <= k - tau are
  // in (tau = 0 waits like sync mode). Ignored in sync mode.
  int tau = 1;
  // step(iteration) gossips once every `gossip_every` iterations (H).
  int gossip_every = 1;
  // Longest wait for a peer's message, or for the transport to release a sent buffer, before
  // IoError (naming the peer and the round).
  std::chrono::milliseconds timeout{30000};
  // Elements per message chunk (see Chunking in wire_format.hpp: at most 256 chunks per vector;
  // 0 = one message per vector). Every peer must use the same value. 1 MiB of float32 by default:
  // large enough to amortise per-message costs, small enough to pipeline the checksum and axpy of
  // one chunk with the transfer of the next and to stay in cache between the two.
  std::uint64_t chunk_elements = 262144;
  // Messages for a round more than this far ahead of ours are rejected (future_round).
  std::int64_t max_rounds_ahead = 1024;
};

// Counters since construction. Messages are transport messages (one per chunk); bytes count
// payload plus header.
struct PushSumMetrics {
  std::int64_t rounds = 0;
  std::uint64_t messages_sent = 0;
  std::uint64_t bytes_sent = 0;
  std::uint64_t messages_received = 0;  // accepted and applied
  std::uint64_t bytes_received = 0;
  // Time on the caller's thread, disjoint: staging/snapshot copies, checksums and queuing of
  // sends (overlap mode: their checksums and sends are on the communication thread, not here);
  double send_seconds = 0.0;
  // blocked on peers' messages, or on the transport releasing a sent buffer;
  double wait_seconds = 0.0;
  // checking what arrived (sync mode; overlap: on the communication thread), scale and axpy.
  double apply_seconds = 0.0;
  std::array<std::uint64_t, kNumRejectCauses> rejected{};

  std::uint64_t rejected_total() const {
    std::uint64_t total = 0;
    for (auto r : rejected) total += r;
    return total;
  }
  std::uint64_t rejected_for(RejectCause cause) const {
    return rejected[static_cast<std::size_t>(cause)];
  }
};

}  // namespace sgp::gossip
