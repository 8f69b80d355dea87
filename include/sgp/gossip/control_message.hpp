#pragma once
// Membership notices of the asynchronous engine (asgp), on the same transport as gossip data but
// with their own magic: a fixed 40-byte header frame and a payload frame, empty except for an
// admission, which carries the sponsor's membership table (Membership::encode), a leave, and a
// resume offer (the checkpoint iterations each rank has).
//
//   offset size  field
//        0    4  magic        0x5347504D ("SGPM")
//        4    2  version      1
//        6    2  kind         ControlKind
//        8    4  sender       int32, who says it
//       12    4  subject      int32, the rank it is about
//       16    4  incarnation  uint32, of the subject (0 at start, +1 per rejoin)
//       20    4  detail       uint32, kind-specific (pace: the sender's busy time per round, us)
//       24    8  round        int64: the sender's round (admit: the round the newcomer starts at)
//       32    8  hash         XXH3_64bits of bytes 0..31
#include <array>
#include <cstddef>
#include <cstdint>
#include <variant>

#include "sgp/gossip/wire_format.hpp"
#include "sgp/transport/message.hpp"

namespace sgp::gossip {

inline constexpr std::uint32_t kControlMagic = 0x5347504D;
inline constexpr std::size_t kControlBytes = 40;

enum class ControlKind : std::uint16_t {
  exclude = 1,        // subject is dead or partitioned: stop pushing to it
  admit = 2,          // subject (re)joins with this incarnation, sponsored by sender
  done = 3,           // subject finished its iterations: stop pushing to it, do not suspect it
  join_request = 4,   // subject asks to rejoin
  leave = 5,          // subject handed its mass to a neighbour and leaves
  done_ack = 6,       // to subject (done): sender pushes nothing more to it; round = 1 + the
                      // round of its last message to subject (0: none)
  fin_ok = 7,         // to subject: everything it sent to the sender has been applied
  resume_offer = 8,   // --resume: the checkpoint iterations the sender knows of (payload), as of
                      // exchange round `round` (peer/resume_agreement.hpp)
  pace = 9,           // asgp, to the sender's in- and out-neighbours: `round` is the sender's
                      // time per round in microseconds (its pushers push to it no faster than
                      // it mixes); `detail` that time less its waits for others (its busy time:
                      // its out-neighbours tell a straggler from a peer that waits)
  progress = 10,      // asgp --work budget, to everyone: `round` is the samples the sender (this
                      // incarnation) has trained on so far, a count that only grows
  budget_spent = 11,  // asgp --work budget, to everyone: the sender knows of `round` samples,
                      // at least the budget: stop training
  pause = 12,         // asgp, to the peers that push to the sender: it does not mix for a while
                      // (a test-set evaluation): push nothing to it for `round` milliseconds or
                      // until its next pace notice (it renews the notice while the pause lasts)
  push_ack = 13,      // asgp --acked-pushes, to subject: the sender has applied subject's push of
                      // round `round`, made by subject's incarnation `incarnation`
  alive = 14,         // asgp --acked-pushes, to the peers the sender pushes to: it lives, with
                      // nothing to push or send again (their failure detectors hear it); `round`
                      // is the sender's round (how far it has got)
};

struct ControlMessage {
  ControlKind kind = ControlKind::exclude;
  std::int32_t sender = 0;
  std::int32_t subject = 0;
  std::uint32_t incarnation = 0;
  std::int64_t round = 0;
  std::uint32_t detail = 0;
};

std::array<std::byte, kControlBytes> encode_control(const ControlMessage& message);
// Whether the first frame starts with the control magic (decide before decoding as data).
bool is_control(const transport::Message& message);
bool is_control_header(std::span<const std::byte> header);
// The message, or why it was refused (an unknown kind is bad_dtype; sender and subject must be
// ranks 0..num_peers-1, the sender not `self`; sender_mismatch when the transport authenticated
// another rank than `sender`; not_entitled for a done, join_request, leave, pace, resume offer,
// progress, budget_spent, pause or alive about another rank than its sender, or a done_ack, fin_ok
// or push_ack addressed to another rank than `self`; bad_size for a payload on any kind but a
// leave, a resume offer and an admission addressed to `self`). Who may exclude or admit depends on
// the receiver's view of the group: AsyncPushSum decides. `payload` points into `message`.
struct DecodedControl {
  ControlMessage control;
  std::span<const std::byte> payload;
};
std::variant<DecodedControl, RejectCause> decode_control(const transport::Message& message,
                                                         int num_peers, int self);

}  // namespace sgp::gossip
