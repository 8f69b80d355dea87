#include "sgp/gossip/control_message.hpp"

#include <xxhash.h>

#include <cstring>

#include "sgp/byte_fields.hpp"

namespace sgp::gossip {

namespace {

constexpr std::uint16_t kControlVersion = 1;
constexpr std::size_t kHashed = 32;

using byte_fields::get;
using byte_fields::put;

// What the header alone says about who may send a notice: one about a rank's own doings only
// from that rank, and one addressed to a rank only to it. (Exclusions and admissions depend on
// the receiver's view of the group: AsyncPushSum decides.)
bool entitled_by_kind(const ControlMessage& m, int self) {
  switch (m.kind) {
    case ControlKind::done:
    case ControlKind::join_request:
    case ControlKind::leave:
    case ControlKind::pace:
    case ControlKind::resume_offer:
    case ControlKind::progress:
    case ControlKind::budget_spent:
    case ControlKind::pause:
    case ControlKind::alive:
      return m.sender == m.subject;
    case ControlKind::done_ack:
    case ControlKind::fin_ok:
    case ControlKind::push_ack:
      return m.subject == self;
    case ControlKind::exclude:
    case ControlKind::admit:
      return true;
  }
  return false;
}

}  // namespace

std::array<std::byte, kControlBytes> encode_control(const ControlMessage& m) {
  std::array<std::byte, kControlBytes> out{};
  put<std::uint32_t>(out, 0, kControlMagic);
  put<std::uint16_t>(out, 4, kControlVersion);
  put<std::uint16_t>(out, 6, static_cast<std::uint16_t>(m.kind));
  put<std::int32_t>(out, 8, m.sender);
  put<std::int32_t>(out, 12, m.subject);
  put<std::uint32_t>(out, 16, m.incarnation);
  put<std::uint32_t>(out, 20, m.detail);
  put<std::int64_t>(out, 24, m.round);
  put<std::uint64_t>(out, 32, XXH3_64bits(out.data(), kHashed));
  return out;
}

bool is_control_header(std::span<const std::byte> header) {
  return header.size() >= 4 && get<std::uint32_t>(header, 0) == kControlMagic;
}

bool is_control(const transport::Message& message) {
  return message.num_frames() >= 1 && is_control_header(message.frame(0));
}

std::variant<DecodedControl, RejectCause> decode_control(const transport::Message& message,
                                                         int num_peers, int self) {
  if (message.num_frames() != 2) return RejectCause::frame_count;
  const auto head = message.frame(0);
  if (head.size() != kControlBytes) return RejectCause::header_size;
  if (get<std::uint32_t>(head, 0) != kControlMagic) return RejectCause::bad_magic;
  if (get<std::uint16_t>(head, 4) != kControlVersion) return RejectCause::bad_version;
  if (get<std::uint64_t>(head, 32) != XXH3_64bits(head.data(), kHashed)) {
    return RejectCause::header_checksum;
  }
  const auto kind = get<std::uint16_t>(head, 6);
  if (kind < 1 || kind > static_cast<std::uint16_t>(ControlKind::alive)) {
    return RejectCause::bad_dtype;
  }
  ControlMessage m;
  m.kind = static_cast<ControlKind>(kind);
  m.sender = get<std::int32_t>(head, 8);
  m.subject = get<std::int32_t>(head, 12);
  m.incarnation = get<std::uint32_t>(head, 16);
  m.detail = get<std::uint32_t>(head, 20);
  m.round = get<std::int64_t>(head, 24);
  if (m.sender < 0 || m.sender >= num_peers || m.sender == self || m.subject < 0 ||
      m.subject >= num_peers || m.round < 0) {
    return RejectCause::unknown_sender;
  }
  // A keyed peer may write any rank into its header; only the key it authenticated with counts.
  if (const auto rank = message.authenticated_rank(); rank && *rank != m.sender) {
    return RejectCause::sender_mismatch;
  }
  if (!entitled_by_kind(m, self)) return RejectCause::not_entitled;
  const auto payload = message.frame(1);
  // Only an admission (to the newcomer) and a leave hand mass over; a resume offer lists
  // checkpoints.
  const bool may_carry = (m.kind == ControlKind::admit && m.subject == self) ||
                         m.kind == ControlKind::leave || m.kind == ControlKind::resume_offer;
  if (!payload.empty() && !may_carry) return RejectCause::bad_size;
  return DecodedControl{m, payload};
}

}  // namespace sgp::gossip
