#pragma once
// The push-sum message on the wire. A peer's vector x goes out in chunks (Chunking below: at
// most 256 of them, by default 1 MiB each), one transport message per chunk, each message two
// frames: a fixed 80-byte header and the chunk's payload. Chunks let the receiver verify and
// apply chunk c while chunk c + 1 is still on the wire, and keep each piece in cache between
// its checksum and its axpy. All integers and floats little-endian (checked at compile time).
//
//   offset size  field
//        0    4  magic            0x53475031 ("SGP1" read as a big-endian word)
//        4    2  version          1
//        6    2  dtype            1 = float32, 2 = float64 running total, 3 = ring allreduce
//                                 float32, 4 = float16, 5 = bfloat16, 6 = float32 delta of a
//                                 running total, 7 = compressed difference, 8 / 9 = acknowledged
//                                 push of float32 / float64 mass (see below)
//        8    4  sender           int32, the sender's rank
//       12    4  chunk            uint32, index of this chunk
//       16    8  round            int64, the gossip round the message belongs to
//       24    8  weight           float64, the sender's push-sum weight w when it sent
//       32    8  coefficient      float64, p_ji: the receiver adds coefficient * (payload, weight)
//                                 (dtypes 2, 6, 8, 9: uint64 edge epoch instead; 3: uint64 step)
//       40    8  total            uint64, elements in the whole vector
//       48    8  offset           uint64, first element of this chunk (= chunk * chunk size)
//       56    8  count            uint64, elements in this chunk
//       64    8  payload_hash     XXH3_64bits of this chunk's payload bytes
//       72    8  header_hash      XXH3_64bits of header bytes 0..71
//   frame 2: count * sizeof(dtype) bytes: elements offset .. offset+count-1 of the sender's x,
//            UNSCALED. The weight is counted once per (sender, round), with chunk 0.
//
// dtype 2 (running sums, the asgp algorithm): the payload is float64, the TOTAL mass the sender
// ever pushed on this edge (sum over its rounds of p_ji x_i), `weight` the total of p_ji w_i,
// `round` the sender's round when it sent (a sequence number: a newer total supersedes an older
// one), and offset 32 the edge's epoch (which incarnations of the two peers it connects and
// the sender's mass generation, so that totals restart from zero when a peer rejoins or the
// sender renormalised after an exclusion). The receiver adds the difference from the
// last total it applied: a lost, duplicated or reordered message loses and doubles nothing.
//
// dtype 6 (running sums in float32, asgp's usual message): the payload is float32, D = T - B,
// the edge's total T (as in dtype 2) less its BASE B: the total of the dtype 2 message that
// was the first send of the current window of kDeltaWindowRounds rounds (window = round /
// kDeltaWindowRounds). The sender's first send in each window is a dtype 2 total (the new
// base); the others are deltas on it. `weight` is the total of p_ji w_i, as in dtype 2 (a
// double is exact). A delta is applied only on top of the base it was made from: the receiver
// holds a base of the same epoch from the delta's window, sent no later than the delta
// (otherwise it is refused, RejectCause::unknown_base: its base was lost or overtaken, and the
// next base carries the mass). docs/asynchronous.md states the error this bounds.
//
// dtype 8 (asgp --acked-pushes, acked_pushes.hpp): the payload is float32, the mass the
// sender pushed at round `round` (a share of w times its ratio z + r), `weight` that share of w,
// offset 32 the edge's epoch as in dtype 2. The receiver adds it once per `round` and
// acknowledges it (control notice push_ack); the sender sends it again until then. dtype 9: the
// same in float64, what a peer that finished training pushes (the peers then settle to float64
// precision, not to float32 rounding's noise).
//
// dtypes 4 and 5 (--compress fp16 / bf16): push-sum messages like dtype 1 whose payload is x
// rounded to IEEE float16 (saturating at +-65504) or bfloat16, 2 bytes per element. The
// sender keeps exactly what the receivers do not get: x_kept = x - (1 - p_ii) * decompress(payload)
// (the rounding error stays with it), so the sum of x over the peers is conserved up to the
// float32 rounding of that subtraction and of the receivers' axpy.
//
// dtype 7 (--compress topk:R | randk:R | sign | qsgd:L, compressed_push_sum.hpp): the payload
// is q = C(x - xhat), the sender's compressed difference to its public copy, in the byte format
// of compress/compressor.hpp; one chunk (0) per message, total = the vector's elements, offset 0,
// count = the payload's bytes. Each round goes to every out-neighbour of the period (its copy
// must follow); coefficient is the round's p_ji, 0 where the edge is not active in the round
// (the receiver then only updates its copy). The compress decoder checks the payload itself
// before anything is applied (bad_payload).
//
// dtype 3 (ring allreduce, the allreduce algorithm): float32 elements offset .. offset+count-1
// of the vector at step `step` (offset 32) of the ring: steps 0 .. N-2 carry partial sums
// (reduce-scatter), steps N-1 .. 2N-3 final averages (all-gather). weight is 1, chunk the
// chunk's index within its segment. See ring_allreduce.hpp.
//
// Why the coefficient travels with the message: the sender pushes its own x buffer as it is
// (zero copy) instead of a scaled copy p_ji * x; the receiver performs y += p_ji * x_msg (one
// axpy it has to do anyway), and the sender scales its own x by p_ii once the transport has
// released the buffer. Mass is conserved exactly as in the textbook form. The receiver checks the
// coefficient against its own copy of the schedule.
//
// Every field is validated before anything is applied (decode_message below for what one message
// can tell, RoundTracker for rounds, chunks and duplicates); a rejected message is counted per
// RejectCause and never applied.
#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <variant>

#include "sgp/transport/message.hpp"

namespace sgp::gossip {

static_assert(std::endian::native == std::endian::little, "the wire format assumes little-endian");

inline constexpr std::uint32_t kWireMagic = 0x53475031;
inline constexpr std::uint16_t kWireVersion = 1;
inline constexpr std::uint16_t kDtypeFloat32 = 1;       // per-round push of float32 x
inline constexpr std::uint16_t kDtypeFloat64Total = 2;  // running total, float64
inline constexpr std::uint16_t kDtypeRingFloat32 = 3;   // ring allreduce chunk, float32
inline constexpr std::uint16_t kDtypeFloat16 = 4;       // per-round push of x as IEEE float16
inline constexpr std::uint16_t kDtypeBfloat16 = 5;      // per-round push of x as bfloat16
inline constexpr std::uint16_t kDtypeFloat32Delta = 6;  // running total less its base, float32
inline constexpr std::int64_t kDeltaWindowRounds = 16;  // dtype 6: a new base every window
inline constexpr std::uint16_t kDtypeCompressed = 7;    // compressed difference to a public copy
inline constexpr std::uint16_t kDtypeFloat32Mass = 8;   // acknowledged push of float32 mass
inline constexpr std::uint16_t kDtypeFloat64Mass = 9;   // ... of float64 mass (when finishing)
inline constexpr std::size_t kHeaderBytes = 80;

struct WireHeader {
  std::uint16_t dtype = kDtypeFloat32;
  std::int32_t sender = 0;
  std::uint32_t chunk = 0;
  std::int64_t round = 0;
  double weight = 0.0;
  double coefficient = 0.0;  // dtype 1
  std::uint64_t epoch = 0;   // dtypes 2 and 6
  std::uint64_t step = 0;    // dtype 3
  std::uint64_t total = 0;
  std::uint64_t offset = 0;
  std::uint64_t count = 0;
  std::uint64_t payload_hash = 0;
};

// How a vector of `total` elements is cut into chunks: chunks of `per_chunk` elements (the last
// one shorter), with per_chunk = max(requested, ceil(total / kMaxChunks)) so that a round never
// has more than kMaxChunks messages per link (requested 0: one chunk). Both ends compute it from
// the same configuration; a message that does not fit it is refused (bad_size).
struct Chunking {
  static constexpr std::uint64_t kMaxChunks = 256;
  Chunking(std::uint64_t total_elements, std::uint64_t requested)
      : total(total_elements),
        per_chunk(std::max<std::uint64_t>({requested == 0 ? total_elements : requested,
                                           (total_elements + kMaxChunks - 1) / kMaxChunks, 1})) {}
  std::uint64_t total;
  std::uint64_t per_chunk;
  std::uint32_t chunks() const {
    return static_cast<std::uint32_t>((total + per_chunk - 1) / per_chunk);
  }
  std::uint64_t offset(std::uint32_t chunk) const { return chunk * per_chunk; }
  std::uint64_t size(std::uint32_t chunk) const {
    return std::min(per_chunk, total - offset(chunk));
  }
};

// Why a message was refused. Keep reject_cause_name() and kNumRejectCauses in step.
enum class RejectCause : int {
  frame_count,  // not exactly [header, payload]
  header_size,  // header frame truncated or oversized
  bad_magic,
  bad_version,
  header_checksum,  // header bytes corrupted
  bad_dtype,
  bad_size,  // count differs from the local vector, or payload bytes != count * 4
  payload_checksum,
  unknown_sender,     // rank outside 0..N-1, or our own rank
  bad_weight,         // weight not in (0, N], or coefficient not in (0, 1]
  unexpected_sender,  // sender does not push to us in that round
  bad_coefficient,    // coefficient differs from the schedule's p_ji
  stale_round,        // round already completed (beyond the staleness bound)
  duplicate_round,    // a second message from the same sender for the same round
  future_round,       // round too far ahead of ours
  sender_mismatch,    // sender differs from the rank the transport authenticated (CURVE)
  non_finite,         // a payload value is NaN or infinite (the sender diverged, or is faulty)
  stale_epoch,        // running totals of an older incarnation of the sender or of us
  not_entitled,       // a control notice its sender may not send (about another rank, an
                      // exclusion by a peer that does not observe the subject, ...)
  unknown_base,       // a float32 delta (dtype 6) whose base total the receiver does not hold
  bad_payload,        // dtype 7: the compress decoder refused the payload (compress::Refusal)
};
inline constexpr int kNumRejectCauses = 21;
std::string_view reject_cause_name(RejectCause cause);

// The header bytes for `header` (magic, version and header hash filled in).
std::array<std::byte, kHeaderBytes> encode_header(const WireHeader& header);

// XXH3_64bits over a payload.
std::uint64_t payload_hash(std::span<const std::byte> payload);

// Whether every element (of the dtype's type) of a payload is finite (one pass, while the chunk
// is in cache after its hash).
bool all_finite(std::span<const std::byte> payload, std::uint16_t dtype = kDtypeFloat32);

// The fields of a header frame whose size, magic, version, hash and dtype (one of the nine
// known) are right; nothing otherwise. What a rejected message claims (sender, round) for naming it
// in messages.
std::optional<WireHeader> parse_header(std::span<const std::byte> head);

// A message whose frames passed every check that needs no state beyond the vector's chunking and
// the number of peers: frame layout, magic, version, header hash, dtype (the one expected),
// sizes, sender range, weight in (0, N] (push-sum weights sum to N) and coefficient in (0, 1]
// (dtypes 2 and 6: a running total, so only finite and >= 0), payload hash, finite payload values,
// and, when the transport authenticated the connection, sender == that rank.
struct DecodedMessage {
  WireHeader header;
  std::span<const std::byte> payload;  // points into `message`
  transport::Message message;
};

// How a float32 message's weight is bounded: push_sum, (0, N] (the weights of a synchronous
// round sum to N); finite, any finite w >= 0 (asgp's weights, reported to the monitor: its
// restarts from z set w = 1 whatever the others hold, so their sum is not bounded by N).
enum class WeightBound { push_sum, finite };

// Either the decoded message or why it was refused. `self` is the receiver's rank.
std::variant<DecodedMessage, RejectCause> decode_message(transport::Message message,
                                                         const Chunking& chunking, int num_peers,
                                                         int self,
                                                         std::uint16_t dtype = kDtypeFloat32,
                                                         WeightBound bound = WeightBound::push_sum);
// The checks of decode_message that need no chunking: frame layout, magic, version, header
// hash and dtype; the header's fields, or why the message was refused.
std::variant<WireHeader, RejectCause> decode_frames(const transport::Message& message,
                                                    std::uint16_t dtype);

// Bytes per element of a dtype.
constexpr std::size_t element_bytes(std::uint16_t dtype) {
  switch (dtype) {
    case kDtypeFloat64Total:
    case kDtypeFloat64Mass:
      return sizeof(double);
    case kDtypeFloat16:
    case kDtypeBfloat16:
      return 2;
    case kDtypeCompressed:
      return 1;  // count is the payload's bytes
    default:
      return sizeof(float);
  }
}

}  // namespace sgp::gossip
