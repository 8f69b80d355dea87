#pragma once
// Settings and metrics of the push-sum engine (PushSumEngine).
#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sgp/compress/compressor.hpp"
#include "sgp/named_values.hpp"

#include "sgp/gossip/wire_format.hpp"

namespace sgp::topology {
class Schedule;
}

namespace sgp::gossip {

enum class Mode {
  sync,       // SGP: round k ends when every in-neighbour's round-k message is in
  overlap,    // OSGP: a communication thread sends/receives while the caller computes; bounded lag
  async,      // asgp: nobody waits; running sums; survives failed, joining and leaving peers
              // (AsyncPushSum, not PushSumEngine)
  allreduce,  // ring allreduce: every round ends with the exact average on every peer
              // (RingAllReduce, not PushSumEngine; links only to rank + 1 and from rank - 1)
};

// How push-sum payloads travel (--compress): as float32, or rounded to a 16-bit float.
enum class Compression { none, fp16, bf16 };
std::span<const NamedValue<Compression>> names(Compression);
// The wire dtype of a push-sum message with this compression (wire_format.hpp).
std::uint16_t wire_dtype(Compression compression);

// The --compress setting: none, a 16-bit format (PushSumEngine), or a compressor of differences
// to public copies (CompressedPushSum). Compares equal to a Compression only without a compressor.
struct PayloadCompression {
  PayloadCompression(Compression f = Compression::none) : format(f) {}  // NOLINT: implicit
  explicit PayloadCompression(compress::Compressor c) : compressor(c) {}
  Compression format = Compression::none;
  std::optional<compress::Compressor> compressor;
  friend bool operator==(const PayloadCompression&, const PayloadCompression&) = default;
  bool operator==(Compression c) const { return !compressor && format == c; }
};
// "none" | "fp16" | "bf16" | "topk:R" | "randk:R" | "sign" | "qsgd:L"; InputError naming `flag`
// and what was expected otherwise.
PayloadCompression parse_payload_compression(std::string_view text, std::string_view flag);
// The text parse_payload_compression reads back. (The enums' name_of stays visible in gossip.)
using sgp::name_of;
std::string name_of(const PayloadCompression& c);

std::span<const NamedValue<Mode>> names(Mode);

// What a peer does against an in-neighbour that pushes poisoned models (--robust): nothing but
// detection, or ClippedGossip (NeighbourWatch: each contribution clipped to a radius around the
// peer's own model; sync mode, CPU backend, float32 payloads).
enum class Robust { none, clip };
std::span<const NamedValue<Robust>> names(Robust);

// An in-neighbour whose models were persistently far from this peer's (NeighbourWatch), with the
// evidence when it was first named.
struct SuspectedNeighbour {
  int rank = -1;
  std::int64_t round = 0;  // the gossip round it was named at
  double distance = 0.0;   // its typical (median) ||z_j - z_i|| over the window then
  double reference = 0.0;  // the other in-neighbours' typical distance then
  double own_norm = 0.0;   // ||z_i|| then
};

struct PushSumConfig {
  Mode mode = Mode::sync;
  // Overlap mode: round k may end while every in-neighbour's messages of rounds <= k - tau are
  // in (tau = 0 waits like sync mode). Ignored in sync mode.
  int tau = 1;
  // Overlap mode: false does the communication thread's work (send, receive, checksums) on the
  // caller's thread, inside step(), keeping overlap's bookkeeping (lag up to tau rounds). For
  // hosts with fewer cores than peers, where a second thread per peer only adds handoffs and
  // context switches. Ignored in sync mode.
  bool comm_thread = true;
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
  // Messages for a round more than this far ahead of ours are rejected (future_round). 0: as
  // far as an in-neighbour can legitimately be ahead (rounds_ahead_bound).
  std::int64_t max_rounds_ahead = 0;
  // Payload bytes held for later rounds; a message for a future round beyond it is rejected
  // (future_round). Raised to what (tau + 2) rounds of every in-neighbour's messages need.
  std::uint64_t max_held_bytes = std::uint64_t{1} << 30;
  // asgp: each edge carries the running total of the mass ever pushed on it, so that a lost,
  // duplicated or reordered message costs nothing (false: each message carries one round's
  // mass, as plain push-sum; kept to show what faults do to it).
  bool running_sums = true;
  // asgp with running_sums on: each push carries float32 mass, kept by its sender until the
  // receiver acknowledges it (acked_pushes.hpp); false: each edge's running total.
  bool acked_pushes = true;
  // Async mode: after its push a peer waits up to this many times its own round time (waits not
  // counted) for the round's in-neighbours that keep pace (AsyncPushSum::keep_step_with_...).
  // 0: never wait.
  double partner_wait = 0.0;
  // Async mode: a restart from z with w = 1 (after an exclusion, or mass held for a whole
  // timeout) ends the peer with IoError instead. Gradient tracking (agt) sets it: the restart
  // rescales the tracker's numerator, whose sum must stay the sum of the gradients.
  bool fail_stop = false;
  // Async mode, --work budget: the samples all peers together train on (0: no budget). Each peer
  // tells the others its running count (SampleBudget, mixer.hpp).
  std::int64_t sample_budget = 0;
  // Sync and overlap modes: x travels rounded to 16 bits (wire dtypes 4, 5); the sender keeps
  // what the rounding took off. CPU backend only.
  Compression compression = Compression::none;
  // Sync and overlap modes: compressed differences to public copies with error feedback
  // (CompressedPushSum, wire dtype 7; compression stays none). CPU backend only.
  std::optional<compress::Compressor> compressor;
  // The consensus step gamma of compressed gossip in (0, 1]; 0: compress::default_consensus_step.
  double consensus_step = 0.0;
  // Compressed gossip: the caller promises that every peer's x is the same when the engine is
  // built (the trainer's seeded initial model), so the public copies start there at both ends of
  // every edge instead of at zero: the first differences sent are the first SGD steps, not the
  // whole model. restore() starts them at zero again (the peers' restored x differ).
  bool copies_start_at_x = false;
  // Sync mode on the CPU: clip each in-neighbour's contribution (ClippedGossip, NeighbourWatch).
  Robust robust = Robust::none;
  // > 0: every this many iterations the round is the ring allreduce's exact average of z instead
  // of gossip (PeriodicAverage, Gossip-PGA). Sync mode, gossip_every 1.
  int global_average_every = 0;
  // Attack simulation for robustness experiments (sync mode, CPU): push -x, the sign-flipped
  // parameters, instead of x (the weight is honest). Never for real training.
  bool sign_flip = false;
};

// How many rounds ahead of a peer an in-neighbour can legitimately be: each hop of a path lets a
// peer run one round (overlap: tau + 1) ahead of its in-neighbour, paths in a strongly connected
// schedule have at most N - 1 hops, and a time-varying one may need `period` rounds per hop. Plus
// one round of margin. config.max_rounds_ahead when that is set.
std::int64_t rounds_ahead_bound(const topology::Schedule& schedule, const PushSumConfig& config);

// InputError "--tau T: ..." when, with this topology, `rank`'s x could shrink below float32's
// range while its in-neighbours are late: overlap mode mixes up to tau + 1 rounds without their
// messages, each scaling x by the rank's self-weight.
void check_tau(const topology::Schedule& schedule, int rank, const PushSumConfig& config);

// Counters since construction. Messages are transport messages (one per chunk); bytes count
// payload plus header.
struct PushSumMetrics {
  std::int64_t rounds = 0;
  std::uint64_t messages_sent = 0;
  std::uint64_t bytes_sent = 0;
  std::uint64_t messages_received = 0;  // accepted and applied
  std::uint64_t bytes_received = 0;
  // Time on the caller's thread, disjoint: staging/snapshot copies, checksums and queuing of
  // sends (overlap mode: their checksums and sends are on the communication thread, not here;
  // overlap on the host: the snapshot pass, which also scales x and adds the messages in);
  double send_seconds = 0.0;
  // blocked on peers' messages, or on the transport releasing a sent buffer;
  double wait_seconds = 0.0;
  // checking what arrived (sync mode; overlap: on the communication thread), scale and axpy.
  double apply_seconds = 0.0;
  std::array<std::uint64_t, kNumRejectCauses> rejected{};
  // asgp: pushes skipped because both send buffers of the edge were still on the wire (the
  // next push's running total carries their mass).
  std::uint64_t skipped_sends = 0;
  std::uint64_t resent_pushes = 0;  // asgp --acked-pushes: pushes sent again, unacknowledged
  // asgp: running totals not applied because a later one that had arrived with them carries
  // their mass (AsyncPushSum::drain).
  std::uint64_t superseded_messages = 0;
  // asgp: drains that stopped at their limit (16 totals, 256 messages) with more maybe waiting: a
  // peer whose in-neighbours send faster than it takes in.
  std::uint64_t full_drains = 0;
  // asgp: rounds this peer kept all its mass because its w was small (it ran ahead of its
  // in-neighbours); a self weight of 1 for the round.
  std::uint64_t held_rounds = 0;
  // asgp: rounds that waited for an in-neighbour keeping pace (--partner-wait), and how long in
  // all (also counted in wait_seconds).
  std::uint64_t partner_waits = 0;
  double partner_wait_seconds = 0.0;
  // Sync mode on the CPU: in-neighbour messages whose contribution was clipped (--robust clip),
  // and the in-neighbours suspected of pushing poisoned models (NeighbourWatch), in order.
  std::uint64_t clipped_messages = 0;
  std::vector<SuspectedNeighbour> suspects;

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
