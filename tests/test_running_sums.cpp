// The two ends of a running-sums edge (running_sums.hpp) on their own: float32 deltas on a
// float64 base carry the sender's total to the receiver within 2^-24 of the mass pushed since
// the base, however long the run and whatever the link loses, duplicates or reorders; a float64
// total delivered last makes the received sum the sent one; a delta the receiver cannot place
// (no base, another window's base) is refused and changes nothing.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <random>
#include <vector>

#include "sgp/gossip/running_sums.hpp"

using namespace sgp::gossip;

namespace {

// One message as the wire has it: a copy of the payload (the buffer is released at once), and
// for the test the exact total the sender held when it sent.
struct Sent {
  std::uint16_t dtype;
  std::int64_t sequence;
  double weight;
  std::vector<double> storage;  // aligned for either dtype
  std::size_t bytes;
  std::vector<double> total;  // what the sender's total was
  std::int64_t due;
};

Sent copy_of(const SendBuffer& b, std::int64_t sequence, double weight, std::size_t dim,
             std::vector<double> total, std::int64_t due) {
  const auto payload = b.payload(0, dim);
  Sent s{b.dtype,        sequence,         weight, std::vector<double>(dim),
         payload.size(), std::move(total), due};
  std::memcpy(s.storage.data(), payload.data(), payload.size());
  return s;
}

InEdge::Chunk chunk_of(const Sent& s) {
  return {
      s.dtype, 0, s.sequence, 0, {reinterpret_cast<const std::byte*>(s.storage.data()), s.bytes},
      s.weight};
}

}  // namespace

TEST_CASE(
    "float32 deltas carry the float64 total within 2^-24 of a window's pushes, without drift") {
  constexpr std::size_t kDim = 32;
  constexpr int kRounds = 4000;
  constexpr double kCoefficient = 0.5;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  OutEdge out(kDim, 0);
  InEdge in(kDim, 1, 0);
  std::vector<double> sent(kDim, 0.0), received(kDim, 0.0), x(kDim), pushed_abs(kDim, 0.0);
  double sent_w = 0.0, received_w = 0.0, largest_push = 0.0;
  std::deque<Sent> link;
  int applied = 0, refused = 0, repeats = 0, deltas = 0;
  auto deliver = [&](std::int64_t now) {
    for (auto it = link.begin(); it != link.end();) {
      if (it->due > now) {
        ++it;
        continue;
      }
      const auto result = in.apply(true, chunk_of(*it), received, received_w);
      refused += result == Applied::no_base;
      repeats += result == Applied::repeat;
      if (result == Applied::yes) {
        ++applied;
        // Within 2^-24 of the pushes since the base (at most a window of them), plus float64
        // rounding of the receiver's sums.
        const double bound = std::ldexp(kDeltaWindowRounds * largest_push, -24);
        for (std::size_t k = 0; k < kDim; ++k)
          REQUIRE(std::abs(received[k] - it->total[k]) <= bound + 1e-13 * std::abs(it->total[k]));
        CHECK(received_w == it->weight);
      }
      it = link.erase(it);
    }
  };
  for (std::int64_t round = 0; round < kRounds; ++round) {
    // Values of every magnitude from 1e-3 to 1e3: the total grows to ~1e6, far past where a
    // float32 total could still resolve one push.
    for (auto& v : x) v = (uniform(rng) - 0.5) * std::pow(10.0, 6.0 * uniform(rng) - 3.0);
    out.push(kCoefficient, x, 1.0);
    for (std::size_t k = 0; k < kDim; ++k) {
      sent[k] += kCoefficient * x[k];
      pushed_abs[k] += std::abs(kCoefficient * x[k]);
      largest_push = std::max(largest_push, std::abs(kCoefficient * x[k]));
    }
    sent_w += kCoefficient;
    double weight = 0.0;
    const auto buffer = out.snapshot(true, false, round, 1, weight);
    REQUIRE(buffer);
    deltas += buffer->dtype == kDtypeFloat32Delta;
    CHECK(weight == sent_w);
    // 10% lost, 5% duplicated, 20% delayed by up to 40 rounds (overtaken, across windows).
    const double fate = uniform(rng);
    const int copies = fate < 0.10 ? 0 : fate < 0.15 ? 2 : 1;
    for (int c = 0; c < copies; ++c) {
      const std::int64_t delay =
          uniform(rng) < 0.2 ? static_cast<std::int64_t>(40 * uniform(rng)) : 0;
      link.push_back(copy_of(*buffer, round, weight, kDim, sent, round + 1 + delay));
    }
    buffer->chunks_on_wire.store(0);  // copied: the wire released it
    deliver(round);
  }
  deliver(kRounds + 100);
  MESSAGE("applied " << applied << ", refused (base lost or overtaken) " << refused
                     << ", repeated or overtaken " << repeats << ", deltas sent " << deltas);
  CHECK(deltas > kRounds / 2);
  CHECK(refused > 0);
  CHECK(repeats > 0);
  // A float64 total delivered last: the receiver holds exactly what the sender pushed.
  double weight = 0.0;
  const auto last = out.snapshot(true, true, kRounds, 1, weight);
  REQUIRE(last);
  CHECK(last->dtype == kDtypeFloat64Total);
  link.push_back(copy_of(*last, kRounds, weight, kDim, sent, 0));
  deliver(kRounds + 1);
  // (Both sides sum the same pushes in float64, in different order: n u sum|push| bounds it.)
  for (std::size_t k = 0; k < kDim; ++k)
    CHECK(std::abs(received[k] - sent[k]) <= std::ldexp(kRounds * pushed_abs[k], -53));
  CHECK(received_w == sent_w);
}

TEST_CASE("a delta without its base, or on another window's base, is refused and changes nothing") {
  constexpr std::size_t kDim = 4;
  OutEdge out(kDim, 0);
  InEdge in(kDim, 1, 0);
  std::vector<double> x(kDim, 1.0), received(kDim, 0.0);
  double w = 0.0, weight = 0.0;
  auto send = [&](std::int64_t round, bool exact = false) {
    out.push(0.5, x, 1.0);
    const auto b = out.snapshot(true, exact, round, 1, weight);
    REQUIRE(b);
    auto s = copy_of(*b, round, weight, kDim, {}, 0);
    b->chunks_on_wire.store(0);
    return s;
  };
  constexpr std::int64_t W = kDeltaWindowRounds;  // windows 1 and 2: rounds W.. and 2W..
  const Sent base1 = send(W), delta1a = send(W + 1), delta1b = send(W + 2);
  const Sent base2 = send(2 * W), delta2 = send(2 * W + 1);
  CHECK(base1.dtype == kDtypeFloat64Total);
  CHECK(delta1a.dtype == kDtypeFloat32Delta);
  CHECK(base2.dtype == kDtypeFloat64Total);
  // No base yet, then a base of the window before: both refused, nothing applied.
  CHECK(in.apply(true, chunk_of(delta1a), received, w) == Applied::no_base);
  CHECK(in.apply(true, chunk_of(base1), received, w) == Applied::yes);
  CHECK(in.apply(true, chunk_of(delta2), received, w) == Applied::no_base);
  CHECK(received[0] == 0.5);
  CHECK(w == 0.5);
  CHECK(in.apply(true, chunk_of(delta1b), received, w) == Applied::yes);
  CHECK(in.apply(true, chunk_of(delta1a), received, w) == Applied::repeat);  // overtaken
  CHECK(received[0] == 1.5);
  CHECK(w == 1.5);
  // A total asked for mid-window (a finished peer's) ends the window's deltas: the next send
  // of that window is a total again, so no delta ever rests on a base the receiver may miss.
  const Sent exact = send(2 * W + 2, true), after = send(2 * W + 3);
  CHECK(exact.dtype == kDtypeFloat64Total);
  CHECK(after.dtype == kDtypeFloat64Total);
  // A hostile sequence far ahead finds no base in its window; one far behind is a repeat.
  Sent hostile = delta1b;
  hostile.sequence = 1000 * W;
  CHECK(in.apply(true, chunk_of(hostile), received, w) == Applied::no_base);
  hostile.sequence = -5;
  CHECK(in.apply(true, chunk_of(hostile), received, w) == Applied::repeat);
  CHECK(received[0] == 1.5);
  CHECK(delta_window(-1) == -1);
  CHECK(delta_window(W - 1) == 0);
  CHECK(delta_window(W) == 1);
}

// A base goes on the wire as the edge's own base vector, not a copy; the next base may change it
// only once that buffer is released, or else on a copy, so that a total still being sent is never
// changed under the transport.
TEST_CASE("a base still on the wire keeps its values while the next base is made") {
  const std::size_t n = 4;
  OutEdge edge(n, 0);
  const std::vector<double> one(n, 1.0);
  double weight = 0.0;
  edge.push(1.0, one, 1.0);
  const auto first = edge.snapshot(true, false, 0, 1, weight);  // a base: the window's first send
  REQUIRE(first->dtype == kDtypeFloat64Total);
  const auto values = [n](const SendBuffer& b) {
    std::vector<double> v(n);
    std::memcpy(v.data(), b.payload(0, n).data(), n * sizeof(double));
    return v;
  };
  CHECK(values(*first) == std::vector<double>(n, 1.0));
  edge.push(1.0, one, 1.0);
  const auto second = edge.snapshot(true, false, kDeltaWindowRounds, 1, weight);  // the next base
  REQUIRE(second->dtype == kDtypeFloat64Total);
  CHECK(values(*first) == std::vector<double>(n, 1.0));  // still on the wire: untouched
  CHECK(values(*second) == std::vector<double>(n, 2.0));
  first->chunks_on_wire.store(0);
  second->chunks_on_wire.store(0);
  // Both released: the next base is made in place, in the vector the last one was sent from.
  const double* before = reinterpret_cast<const double*>(second->payload(0, n).data());
  edge.push(1.0, one, 1.0);
  const auto third = edge.snapshot(true, false, 2 * kDeltaWindowRounds, 1, weight);
  CHECK(reinterpret_cast<const double*>(third->payload(0, n).data()) == before);
  CHECK(values(*third) == std::vector<double>(n, 3.0));
}

// asgp holds a peer's mass as w (z + r) (HeldMass): z in float32, r the ratio's part below it.
// 10,000 totals taken in, each followed by a push of half the mass (w halves, z and r stay), keep
// the ratio to float64's precision against the mass kept in double; z alone, rounded at every
// total, drifts by float32's (in the engine: 8 processes ended 1.6e-7 from the exact mean).
TEST_CASE("taking totals into z and its residual keeps the ratio to float64's precision") {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> share(0.05, 0.5), value(-4.0, 4.0);
  float z = 3.0f, r = 0.0f, z_alone = 3.0f, no_r = 0.0f;
  double w = 1.0, x = 3.0;  // the reference: the mass itself, in double
  for (int k = 0; k < 10000; ++k) {
    const double dw = share(rng), dx = dw * value(rng);  // a total of weight dw, ratio in [-4, 4]
    take_mass(z, r, w, 1.0 / (w + dw), dx);
    no_r = 0.0f;
    take_mass(z_alone, no_r, w, 1.0 / (w + dw), dx);
    x += dx;
    w += dw;
    x *= 0.5;  // a push of half the mass: exact in both
    w *= 0.5;
  }
  const double ratio = x / w;
  const double with_r = std::abs(static_cast<double>(z) + static_cast<double>(r) - ratio);
  const double without = std::abs(static_cast<double>(z_alone) - ratio);
  MESSAGE("|z + r - x / w| = " << with_r << ", |z - x / w| without r = " << without
                               << " (x / w = " << ratio << ")");
  CHECK(with_r < 1e-12 * std::abs(ratio) + 1e-13);
  CHECK(without > 1e-8 * std::abs(ratio));
}
