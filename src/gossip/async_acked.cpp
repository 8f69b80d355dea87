// asgp with acknowledged pushes (--acked-pushes, acked_pushes.hpp): each push carries float32
// mass, the sender keeps it until the receiver acknowledges it and sends it again until then.
//
// When to send again: not while the transport still holds the push (a peer not yet connected
// would otherwise queue a copy every keep-alive period), not to a peer that pauses (it takes
// nothing in while it evaluates), and only once the receiver has had three of its rounds (or
// this peer's, whichever is longer) to apply and acknowledge it.
#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "failure_detector.hpp"
#include "sgp/gossip/acked_pushes.hpp"
#include "sgp/gossip/async_push_sum.hpp"

namespace sgp::gossip {

using std::chrono::milliseconds;

AckedOutEdge& AsyncPushSum::acked_out_edge(int dest) {
  const std::uint64_t epoch = out_epoch(dest);
  auto& edge = acked_out_[dest];
  if (!edge || edge->epoch() != epoch) edge = std::make_unique<AckedOutEdge>(n_, epoch);
  return *edge;
}

// Pushes weight `share` of this peer's mass to dest, after sending again what dest has not
// acknowledged; with kMaxUnacked pushes unacknowledged nothing moves (counted in skipped_sends).
void AsyncPushSum::push_acked(int dest, double share, const HeldMass& mass) {
  auto& edge = acked_out_edge(dest);
  send_again(dest, edge);
  if (const auto push = edge.push(share, mass, round_, done_[rank_])) {
    send_push(dest, edge.epoch(), push);
  } else {
    ++metrics_.skipped_sends;
    say_alive(dest);
  }
}

bool AsyncPushSum::send_again(int dest, AckedOutEdge& edge) {
  if (paused(dest)) return false;
  const auto due = edge.due_again(Clock::now(), resend_after(dest));
  for (const auto& push : due) {
    send_push(dest, edge.epoch(), push);
    ++metrics_.resent_pushes;
  }
  return !due.empty();
}

milliseconds AsyncPushSum::resend_after(int dest) const {
  double pace = mix_interval_s_;
  if (const auto it = pace_of_.find(dest); it != pace_of_.end()) pace = std::max(pace, it->second);
  return std::max(milliseconds(2),
                  std::chrono::ceil<milliseconds>(std::chrono::duration<double>(3.0 * pace)));
}

void AsyncPushSum::remind(int dest) {
  if (!config_.acked_pushes) {
    send_total(dest, out_edge(dest));
    return;
  }
  if (send_again(dest, acked_out_edge(dest))) return;
  say_alive(dest);
}

void AsyncPushSum::say_alive(int dest) {
  last_send_to_[dest] = Clock::now();
  tell(dest, {ControlKind::alive, rank_, rank_, membership_.incarnation(rank_), round_});
}

void AsyncPushSum::send_push(int dest, std::uint64_t epoch,
                             const std::shared_ptr<AckedPush>& push) {
  last_send_to_[dest] = Clock::now();
  push->sent_at = last_send_to_[dest];
  WireHeader h;
  h.dtype = push->dtype();
  h.sender = rank_;
  h.round = push->sequence;
  h.weight = push->weight;
  h.epoch = epoch;
  h.total = n_;
  h.count = n_;
  push->chunks_on_wire.fetch_add(1, std::memory_order_acq_rel);
  // The push stays alive until the transport has released it (and held until acknowledged).
  send_chunk(dest, h, push->payload(),
             [push] { push->chunks_on_wire.fetch_sub(1, std::memory_order_acq_rel); });
}

// A push from in-neighbour h.sender whose epoch handle_data() checked: applied once, and
// acknowledged every time it comes (a repeat means the sender did not get the first ack). A
// peer that finished training pushes in float64 (dtype 9), so that the peers settle exactly.
void AsyncPushSum::handle_acked_push(const WireHeader& h, std::span<const std::byte> payload) {
  const int s = h.sender;
  auto& edge = acked_in_[s];
  if (!edge || edge->epoch() != h.epoch) edge = std::make_unique<AckedInEdge>(h.epoch);
  detector_->heard(s, Clock::now());
  note_round_from(s, h.round);
  switch (edge->apply(h.round, h.dtype, payload, h.weight, held())) {
    case Applied::yes:
      ++metrics_.messages_received;
      metrics_.bytes_received += kHeaderBytes + payload.size();
      break;
    case Applied::bad_weight:
      reject(RejectCause::bad_weight, fmt::format("a push from rank {}", s));
      return;
    default:
      break;
  }
  const auto incarnation = EdgeEpoch::unpack(h.epoch).sender_incarnation;
  tell(s, {ControlKind::push_ack, rank_, s, incarnation, h.round});
}

// An acknowledgement for a push of this incarnation: the push is dropped (one of an earlier
// incarnation, or of a push already dropped with its edge, is ignored).
void AsyncPushSum::on_push_ack(const ControlMessage& c) {
  if (c.incarnation != membership_.incarnation(rank_)) return;
  const auto it = acked_out_.find(c.sender);
  if (it != acked_out_.end()) it->second->acknowledge(c.round);
}

}  // namespace sgp::gossip
