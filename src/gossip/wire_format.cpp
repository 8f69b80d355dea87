#include "sgp/gossip/wire_format.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <optional>

#include "sgp/byte_fields.hpp"
#include "sgp/vector_clones.hpp"

namespace sgp::gossip {
namespace {

using byte_fields::get;
using byte_fields::put;

constexpr std::size_t kHashedHeaderBytes = 72;

// asgp's dtypes (running totals, acknowledged pushes) carry the edge's epoch at offset 32.
bool carries_epoch(std::uint16_t dtype) {
  return dtype == kDtypeFloat64Total || dtype == kDtypeFloat32Delta || dtype == kDtypeFloat32Mass ||
         dtype == kDtypeFloat64Mass;
}

}  // namespace

std::string_view reject_cause_name(RejectCause cause) {
  switch (cause) {
    case RejectCause::frame_count:
      return "frame_count";
    case RejectCause::header_size:
      return "header_size";
    case RejectCause::bad_magic:
      return "bad_magic";
    case RejectCause::bad_version:
      return "bad_version";
    case RejectCause::header_checksum:
      return "header_checksum";
    case RejectCause::bad_dtype:
      return "bad_dtype";
    case RejectCause::bad_size:
      return "bad_size";
    case RejectCause::payload_checksum:
      return "payload_checksum";
    case RejectCause::unknown_sender:
      return "unknown_sender";
    case RejectCause::bad_weight:
      return "bad_weight";
    case RejectCause::unexpected_sender:
      return "unexpected_sender";
    case RejectCause::bad_coefficient:
      return "bad_coefficient";
    case RejectCause::stale_round:
      return "stale_round";
    case RejectCause::duplicate_round:
      return "duplicate_round";
    case RejectCause::future_round:
      return "future_round";
    case RejectCause::sender_mismatch:
      return "sender_mismatch";
    case RejectCause::non_finite:
      return "non_finite";
    case RejectCause::stale_epoch:
      return "stale_epoch";
    case RejectCause::not_entitled:
      return "not_entitled";
    case RejectCause::unknown_base:
      return "unknown_base";
    case RejectCause::bad_payload:
      return "bad_payload";
  }
  return "unknown";
}

std::uint64_t payload_hash(std::span<const std::byte> payload) {
  return XXH3_64bits(payload.data(), payload.size());
}

std::array<std::byte, kHeaderBytes> encode_header(const WireHeader& h) {
  std::array<std::byte, kHeaderBytes> out{};
  put<std::uint32_t>(out, 0, kWireMagic);
  put<std::uint16_t>(out, 4, kWireVersion);
  put<std::uint16_t>(out, 6, h.dtype);
  put<std::int32_t>(out, 8, h.sender);
  put<std::uint32_t>(out, 12, h.chunk);
  put<std::int64_t>(out, 16, h.round);
  put<double>(out, 24, h.weight);
  if (carries_epoch(h.dtype)) {
    put<std::uint64_t>(out, 32, h.epoch);
  } else if (h.dtype == kDtypeRingFloat32) {
    put<std::uint64_t>(out, 32, h.step);
  } else {
    put<double>(out, 32, h.coefficient);
  }
  put<std::uint64_t>(out, 40, h.total);
  put<std::uint64_t>(out, 48, h.offset);
  put<std::uint64_t>(out, 56, h.count);
  put<std::uint64_t>(out, 64, h.payload_hash);
  put<std::uint64_t>(out, 72, XXH3_64bits(out.data(), kHashedHeaderBytes));
  return out;
}

namespace {

// A value is NaN or infinite iff its exponent bits are all set (memcpy: any alignment). `Bits`
// is the unsigned integer of the float type's width, `infinity` its bit pattern of +inf. An OR
// of compares, not a max of magnitudes: baseline x86-64 has no unsigned 32-bit or 64-bit max, and
// the max loop ran at 7 memcpy of the payload (a tenth of a W1 round's CPU in sgp and asgp).
template <class Bits>
bool all_finite_bits(const std::byte* payload, std::size_t count, Bits infinity) {
  Bits any_exponent_full = 0;
  for (std::size_t k = 0; k < count; ++k) {
    Bits bits;
    std::memcpy(&bits, payload + k * sizeof(Bits), sizeof(Bits));
    any_exponent_full |= static_cast<Bits>((bits & infinity) == infinity);
  }
  return any_exponent_full == 0;
}

SGP_VECTOR_CLONES bool all_finite_64(const std::byte* payload, std::size_t count) {
  return all_finite_bits<std::uint64_t>(payload, count, 0x7ff0000000000000u);
}

SGP_VECTOR_CLONES bool all_finite_32(const std::byte* payload, std::size_t count) {
  return all_finite_bits<std::uint32_t>(payload, count, 0x7f800000u);
}

SGP_VECTOR_CLONES bool all_finite_16(const std::byte* payload, std::size_t count,
                                     std::uint16_t infinity) {
  return all_finite_bits<std::uint16_t>(payload, count, infinity);
}

}  // namespace

bool all_finite(std::span<const std::byte> payload, std::uint16_t dtype) {
  const std::byte* p = payload.data();
  switch (dtype) {
    case kDtypeFloat64Total:
    case kDtypeFloat64Mass:
      return all_finite_64(p, payload.size() / 8);
    case kDtypeFloat16:
      return all_finite_16(p, payload.size() / 2, 0x7c00u);
    case kDtypeBfloat16:
      return all_finite_16(p, payload.size() / 2, 0x7f80u);
    default:
      return all_finite_32(p, payload.size() / 4);
  }
}

std::optional<WireHeader> parse_header(std::span<const std::byte> head) {
  if (head.size() != kHeaderBytes || get<std::uint32_t>(head, 0) != kWireMagic ||
      get<std::uint16_t>(head, 4) != kWireVersion ||
      get<std::uint64_t>(head, 72) != XXH3_64bits(head.data(), kHashedHeaderBytes)) {
    return std::nullopt;
  }
  WireHeader h;
  h.dtype = get<std::uint16_t>(head, 6);
  if (h.dtype < kDtypeFloat32 || h.dtype > kDtypeFloat64Mass) return std::nullopt;
  h.sender = get<std::int32_t>(head, 8);
  h.chunk = get<std::uint32_t>(head, 12);
  h.round = get<std::int64_t>(head, 16);
  h.weight = get<double>(head, 24);
  if (carries_epoch(h.dtype)) {
    h.epoch = get<std::uint64_t>(head, 32);
  } else if (h.dtype == kDtypeRingFloat32) {
    h.step = get<std::uint64_t>(head, 32);
  } else {
    h.coefficient = get<double>(head, 32);
  }
  h.total = get<std::uint64_t>(head, 40);
  h.offset = get<std::uint64_t>(head, 48);
  h.count = get<std::uint64_t>(head, 56);
  h.payload_hash = get<std::uint64_t>(head, 64);
  return h;
}

namespace {

// Whether the weight (and coefficient) can be genuine. Push-sum weights are positive and sum to
// N over all peers and messages in flight, so no genuine weight exceeds N (a relative 1e-9
// allows for rounding). A running total (dtypes 2 and 6) only grows: finite and >= 0; an
// acknowledged push (dtypes 8, 9) too (the receiver refuses a weight of 0: bad_weight).
bool plausible_weight(const WireHeader& h, int num_peers, WeightBound bound) {
  if (!std::isfinite(h.weight)) return false;
  if (carries_epoch(h.dtype) || bound == WeightBound::finite) return h.weight >= 0.0;
  // dtype 7 goes to out-neighbours of other phases too, with coefficient 0 (copy only).
  const bool coefficient_ok =
      h.dtype == kDtypeCompressed ? h.coefficient >= 0.0 : h.coefficient > 0.0;
  return h.weight > 0.0 && h.weight <= static_cast<double>(num_peers) * (1.0 + 1e-9) &&
         std::isfinite(h.coefficient) && coefficient_ok && h.coefficient <= 1.0;
}

// Why a well-formed header does not fit this receiver, or nothing.
std::optional<RejectCause> field_problem(const WireHeader& h, const transport::Message& message,
                                         std::size_t payload_bytes, const Chunking& chunking,
                                         int num_peers, int self, WeightBound bound) {
  if (h.dtype == kDtypeCompressed) {
    // One chunk of any length: the compress decoder checks the payload's own lengths.
    if (h.total != chunking.total || h.chunk != 0 || h.offset != 0 || h.count != payload_bytes ||
        payload_bytes == 0) {
      return RejectCause::bad_size;
    }
  } else if (h.total != chunking.total || h.chunk >= chunking.chunks() ||
             h.offset != chunking.offset(h.chunk) || h.count != chunking.size(h.chunk) ||
             payload_bytes != h.count * element_bytes(h.dtype)) {
    return RejectCause::bad_size;
  }
  if (h.sender < 0 || h.sender >= num_peers || h.sender == self) {
    return RejectCause::unknown_sender;
  }
  // A keyed peer may write any rank into its header; only the key it authenticated with counts.
  if (const auto rank = message.authenticated_rank(); rank && *rank != h.sender) {
    return RejectCause::sender_mismatch;
  }
  if (!plausible_weight(h, num_peers, bound)) return RejectCause::bad_weight;
  return std::nullopt;
}

}  // namespace

namespace {

// The payload's checksum and finiteness in one pass: block by block, each block hashed (XXH3's
// streaming form gives the one-shot hash) and checked while it is in cache, instead of two
// passes over a payload that does not fit in it (a W1 chunk is 1 MiB). The checksum is reported
// first, as before.
std::optional<RejectCause> payload_problem(std::span<const std::byte> payload, std::uint64_t hash,
                                           std::uint16_t dtype) {
  constexpr std::size_t kBlock = 32 * 1024;  // a multiple of 8: values never straddle blocks
  struct StateDeleter {
    void operator()(XXH3_state_t* s) const { XXH3_freeState(s); }
  };
  thread_local const std::unique_ptr<XXH3_state_t, StateDeleter> state(XXH3_createState());
  if (!state) throw std::bad_alloc();
  XXH3_64bits_reset(state.get());
  bool finite = true;
  for (std::size_t at = 0; at < payload.size(); at += kBlock) {
    const auto block = payload.subspan(at, std::min(kBlock, payload.size() - at));
    XXH3_64bits_update(state.get(), block.data(), block.size());
    // dtype 7: bytes, not values (the compress decoder checks each value it reads).
    finite = finite && (dtype == kDtypeCompressed || all_finite(block, dtype));
  }
  if (XXH3_64bits_digest(state.get()) != hash) return RejectCause::payload_checksum;
  if (!finite) return RejectCause::non_finite;
  return std::nullopt;
}

}  // namespace

std::variant<WireHeader, RejectCause> decode_frames(const transport::Message& message,
                                                    std::uint16_t dtype) {
  if (message.num_frames() != 2) return RejectCause::frame_count;
  const auto head = message.frame(0);
  if (head.size() != kHeaderBytes) return RejectCause::header_size;
  if (get<std::uint32_t>(head, 0) != kWireMagic) return RejectCause::bad_magic;
  if (get<std::uint16_t>(head, 4) != kWireVersion) return RejectCause::bad_version;
  if (get<std::uint64_t>(head, 72) != XXH3_64bits(head.data(), kHashedHeaderBytes)) {
    return RejectCause::header_checksum;
  }
  const auto h = parse_header(head);
  // The only check parse_header adds to those above is the dtype.
  if (!h || h->dtype != dtype) return RejectCause::bad_dtype;
  return *h;
}

std::variant<DecodedMessage, RejectCause> decode_message(transport::Message message,
                                                         const Chunking& chunking, int num_peers,
                                                         int self, std::uint16_t dtype,
                                                         WeightBound bound) {
  auto frames = decode_frames(message, dtype);
  if (auto* cause = std::get_if<RejectCause>(&frames)) return *cause;
  const auto h = std::get<WireHeader>(frames);
  const auto payload = message.frame(1);
  if (auto cause = field_problem(h, message, payload.size(), chunking, num_peers, self, bound)) {
    return *cause;
  }
  if (auto cause = payload_problem(payload, h.payload_hash, dtype)) return *cause;
  return DecodedMessage{h, payload, std::move(message)};
}

}  // namespace sgp::gossip
