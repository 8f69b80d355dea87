// The two ends of an edge with acknowledged pushes (acked_pushes.hpp) on their own: a push takes
// out of the sender exactly the float32 values it carries, the sender holds at most two pushes
// and none older than the window, and over a lossy, duplicating, reordering link (acks lost too)
// every push is applied exactly once, so the mass of sender, receiver and pushes held is what
// it was, to float64 rounding.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <random>
#include <vector>

#include "sgp/gossip/acked_pushes.hpp"

using namespace sgp::gossip;

namespace {

struct Peer {
  std::vector<float> z, r;
  double w = 1.0;
  HeldMass held() { return {z, r, w}; }
  // Element k's mass, w (z + r).
  double mass(std::size_t k) const {
    return w * (static_cast<double>(z[k]) + static_cast<double>(r[k]));
  }
};

Peer peer_with(std::size_t dim, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  Peer p{std::vector<float>(dim), std::vector<float>(dim, 0.0f)};
  for (auto& v : p.z) v = u(rng);
  return p;
}

// A message on the wire: a copy of the push's payload.
struct OnWire {
  std::int64_t sequence;
  std::uint16_t dtype;
  double weight;
  std::vector<std::byte> payload;
};

OnWire copy_of(const AckedPush& p) {
  const auto bytes = p.payload();
  return {p.sequence, p.dtype(), p.weight, std::vector<std::byte>(bytes.begin(), bytes.end())};
}

double held_mass(const std::vector<std::shared_ptr<AckedPush>>& held, std::size_t k) {
  double m = 0.0;
  for (const auto& p : held) m += p->at(k);
  return m;
}

}  // namespace

TEST_CASE("a push takes out of the sender exactly the float32 mass it carries") {
  constexpr std::size_t dim = 1000;
  for (const bool precise : {false, true}) {
    Peer sender = peer_with(dim, 1);
    sender.w = 0.7;
    std::vector<double> before(dim);
    for (std::size_t k = 0; k < dim; ++k) before[k] = sender.mass(k);
    AckedOutEdge edge(dim, 5);
    const auto push = edge.push(0.7 * 0.3, sender.held(), 42, precise);
    REQUIRE(push);
    CHECK(push->sequence == 42);
    CHECK(push->dtype() == (precise ? kDtypeFloat64Mass : kDtypeFloat32Mass));
    CHECK(sender.w == doctest::Approx(0.7 * 0.7).epsilon(1e-15));
    double worst = 0.0;
    for (std::size_t k = 0; k < dim; ++k) {
      const double carried = push->at(k);
      worst = std::max(worst, std::abs(sender.mass(k) + carried - before[k]) / std::abs(before[k]));
    }
    CHECK(worst < 1e-14);
  }
}

TEST_CASE("a sender holds at most two pushes, and none made a window of pushes ago") {
  constexpr std::size_t dim = 16;
  Peer sender = peer_with(dim, 2);
  AckedOutEdge edge(dim, 1);
  const auto first = edge.push(0.1 * sender.w, sender.held(), 0);
  REQUIRE(first);
  REQUIRE(edge.push(0.1 * sender.w, sender.held(), 1));
  const double w = sender.w;
  CHECK_FALSE(edge.push(0.1 * sender.w, sender.held(), 2));  // two unacknowledged
  CHECK(sender.w == w);                                      // nothing moved
  CHECK(edge.acknowledge(1));
  CHECK_FALSE(edge.acknowledge(1));  // a repeated ack finds nothing
  // Push 0 stays unacknowledged while pushes 1 .. 7 are acknowledged: push 8 would be made a
  // window after it, which the receiver could no longer tell from a repeat.
  for (std::int64_t round = 2; round < static_cast<std::int64_t>(kAckWindow); ++round) {
    REQUIRE(edge.push(0.1 * sender.w, sender.held(), round));
    CHECK(edge.acknowledge(round));
  }
  CHECK_FALSE(edge.push(0.1 * sender.w, sender.held(), 100));
  CHECK(edge.acknowledge(first->sequence));
  CHECK(edge.push(0.1 * sender.w, sender.held(), 100));
}

TEST_CASE("a receiver applies each push once, however often and late it comes") {
  constexpr std::size_t dim = 8;
  Peer sender = peer_with(dim, 3), receiver = peer_with(dim, 4);
  AckedOutEdge out(dim, 1);
  AckedInEdge in(1);
  const auto p = out.push(0.25, sender.held(), 10);
  const auto wire = copy_of(*p);
  CHECK(in.apply(wire.sequence, wire.dtype, wire.payload, wire.weight, receiver.held()) ==
        Applied::yes);
  const double w = receiver.w;
  CHECK(in.apply(wire.sequence, wire.dtype, wire.payload, wire.weight, receiver.held()) ==
        Applied::repeat);
  CHECK(receiver.w == w);
  CHECK(in.apply(11, wire.dtype, wire.payload, 0.0, receiver.held()) == Applied::bad_weight);
  // Older than the window of sequence numbers applied since: a repeat.
  for (std::int64_t s = 20; s < 20 + static_cast<std::int64_t>(kAckWindow); ++s) {
    CHECK(in.apply(s, wire.dtype, wire.payload, 1e-3, receiver.held()) == Applied::yes);
  }
  CHECK(in.apply(12, wire.dtype, wire.payload, 1e-3, receiver.held()) == Applied::repeat);
}

TEST_CASE("over a lossy link with lost acks, every push is applied once: the mass is kept") {
  constexpr std::size_t dim = 64;
  constexpr int rounds = 4000;
  Peer sender = peer_with(dim, 5), receiver = peer_with(dim, 6);
  std::vector<double> total(dim);
  for (std::size_t k = 0; k < dim; ++k) total[k] = sender.mass(k) + receiver.mass(k);
  const double total_w = sender.w + receiver.w;
  AckedOutEdge out(dim, 9);
  AckedInEdge in(9);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::deque<OnWire> wire;
  std::deque<std::int64_t> acks;
  std::vector<std::shared_ptr<AckedPush>> held;  // the sender's unacknowledged pushes
  int applied = 0, repeats = 0, resent = 0;
  const auto send = [&](const AckedPush& p) {
    if (u(rng) < 0.15) return;  // lost
    wire.push_back(copy_of(p));
    if (u(rng) < 0.05) wire.push_back(copy_of(p));                              // duplicated
    if (wire.size() > 1 && u(rng) < 0.2) std::swap(wire.back(), wire.front());  // reordered
  };
  for (int round = 0; round < rounds || !held.empty(); ++round) {
    if (round < rounds) {
      if (const auto p = out.push(0.5 * sender.w, sender.held(), round, round % 50 == 0)) {
        held.push_back(p);
        send(*p);
      }
    }
    for (const auto& p : out.due_again(std::chrono::steady_clock::now(), {})) {
      send(*p);
      ++resent;
    }
    // The receiver takes in about one message a round and sends its acks back (a fifth lost),
    // and gives half its mass back to the sender so that both keep pushing.
    for (int taken = 0; taken < 2 && !wire.empty(); ++taken) {
      const auto m = std::move(wire.front());
      wire.pop_front();
      const auto verdict = in.apply(m.sequence, m.dtype, m.payload, m.weight, receiver.held());
      REQUIRE(verdict != Applied::bad_weight);
      (verdict == Applied::yes ? applied : repeats) += 1;
      if (u(rng) >= 0.2) acks.push_back(m.sequence);
    }
    while (!acks.empty()) {
      if (out.acknowledge(acks.front())) {
        std::erase_if(held, [&](const auto& p) { return p->sequence == acks.front(); });
      }
      acks.pop_front();
    }
    const double back = 0.5 * receiver.w;
    for (std::size_t k = 0; k < dim; ++k) {
      const double m = 0.5 * receiver.mass(k);
      take_mass(receiver.z[k], receiver.r[k], receiver.w, 1.0 / (receiver.w - back), -m);
      take_mass(sender.z[k], sender.r[k], sender.w, 1.0 / (sender.w + back), m);
    }
    receiver.w -= back;
    sender.w += back;
  }
  for (const auto& m : wire) {  // copies still on the wire: repeats, every one
    CHECK(in.apply(m.sequence, m.dtype, m.payload, m.weight, receiver.held()) == Applied::repeat);
  }
  CHECK(applied > rounds / 4);
  CHECK(repeats > 10);
  CHECK(resent > 10);
  CHECK(sender.w + receiver.w == doctest::Approx(total_w).epsilon(1e-12));
  double worst = 0.0;
  for (std::size_t k = 0; k < dim; ++k) {
    const double now = sender.mass(k) + receiver.mass(k) + held_mass(held, k);
    worst = std::max(worst, std::abs(now - total[k]) / (std::abs(total[k]) + 1.0));
  }
  CHECK(worst < 1e-12);
}
