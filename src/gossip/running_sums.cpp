#include "sgp/gossip/running_sums.hpp"

#include <algorithm>
#include <cmath>

#include "sgp/error.hpp"
#include "sgp/vector_clones.hpp"

namespace sgp::gossip {
namespace {

// asgp's hot loops (a round's receive and push) are vector clones: with baseline x86-64's two
// doubles per vector, taking a delta into z (the float32 and float64 conversions of take_mass)
// cost 4 memcpy of the vector.

SGP_VECTOR_CLONES void take_deltas(const float* __restrict next, float* __restrict applied,
                                   float* __restrict z, float* __restrict r, std::size_t count,
                                   double before, double after) {
  const double inverse = 1.0 / after;
  for (std::size_t k = 0; k < count; ++k) {
    take_mass(z[k], r[k], before, inverse,
              static_cast<double>(next[k]) - static_cast<double>(applied[k]));
    applied[k] = next[k];
  }
}

SGP_VECTOR_CLONES void take_totals(const double* __restrict total, double* __restrict base,
                                   float* __restrict applied, float* __restrict z,
                                   float* __restrict r, std::size_t count, double before,
                                   double after) {
  const double inverse = 1.0 / after;
  for (std::size_t k = 0; k < count; ++k) {
    take_mass(z[k], r[k], before, inverse, (total[k] - base[k]) - static_cast<double>(applied[k]));
    base[k] = total[k];
    applied[k] = 0.0f;
  }
}

// added += coefficient * (z + r), and its float32 rounding (the send's delta) if asked, in one
// pass.
SGP_VECTOR_CLONES void add_ratio(double coefficient, const float* __restrict z,
                                 const float* __restrict r, double* __restrict added,
                                 float* __restrict delta, std::size_t count) {
  for (std::size_t k = 0; k < count; ++k) {
    added[k] += coefficient * (static_cast<double>(z[k]) + static_cast<double>(r[k]));
    if (delta) delta[k] = static_cast<float>(added[k]);
  }
}

}  // namespace

std::int64_t delta_window(std::int64_t round) {
  const std::int64_t w = round / kDeltaWindowRounds;
  return round < 0 && round % kDeltaWindowRounds != 0 ? w - 1 : w;
}

std::span<const std::byte> SendBuffer::payload(std::size_t offset, std::size_t count) const {
  if (dtype == kDtypeFloat32Delta) {
    return {reinterpret_cast<const std::byte*>(deltas.data() + offset), count * sizeof(float)};
  }
  return {reinterpret_cast<const std::byte*>(totals->data() + offset), count * sizeof(double)};
}

OutEdge::OutEdge(std::size_t n, std::uint64_t epoch)
    : epoch_(epoch), base_(std::make_shared<std::vector<double>>(n, 0.0)), since_base_(n, 0.0) {
  for (auto& b : buffers_) b = std::make_shared<SendBuffer>();
}

void OutEdge::push(double coefficient, std::span<const double> x, double w) {
  for (std::size_t k = 0; k < since_base_.size(); ++k) since_base_[k] += coefficient * x[k];
  total_w_ += coefficient * w;
}

// The mass is w (z + r): its share is coefficient * w times z + r.
void OutEdge::push_z(double coefficient, const HeldMass& held) {
  const double share = coefficient * held.w;
  add_ratio(share, held.z.data(), held.residual.data(), since_base_.data(), nullptr,
            since_base_.size());
  total_w_ += share;
}

std::shared_ptr<SendBuffer> OutEdge::snapshot(bool running_sums, bool exact, std::int64_t round,
                                              int chunks, double& weight_out) {
  auto b = free_buffer();
  if (!b) return nullptr;
  weight_out = total_w_;
  if (sends_delta(running_sums, exact, round)) {
    fill_delta(*b);
  } else {
    fill_total(*b, running_sums);
    if (running_sums) {
      const std::int64_t window = delta_window(round);
      window_exact_ = base_window_ == window;  // a second total in this window
      base_window_ = window;
    }
  }
  b->chunks_on_wire.store(chunks, std::memory_order_release);
  return b;
}

std::shared_ptr<SendBuffer> OutEdge::push_z_and_snapshot(double coefficient, const HeldMass& held,
                                                         bool exact, std::int64_t round, int chunks,
                                                         double& weight_out) {
  auto b = free_buffer();
  if (!b || !sends_delta(true, exact, round)) {
    push_z(coefficient, held);
    return snapshot(true, exact, round, chunks, weight_out);
  }
  const double share = coefficient * held.w;
  b->dtype = kDtypeFloat32Delta;
  b->totals.reset();
  b->deltas.resize(since_base_.size());
  add_ratio(share, held.z.data(), held.residual.data(), since_base_.data(), b->deltas.data(),
            since_base_.size());
  total_w_ += share;
  weight_out = total_w_;
  b->chunks_on_wire.store(chunks, std::memory_order_release);
  return b;
}

std::shared_ptr<SendBuffer> OutEdge::free_buffer() {
  for (auto& b : buffers_) {
    if (b->chunks_on_wire.load(std::memory_order_acquire) == 0) return b;
  }
  return nullptr;
}

// A delta on the base, unless this is the window's first send (a new base), a total was asked
// for (then the window's later sends are totals too), or running sums are off.
bool OutEdge::sends_delta(bool running_sums, bool exact, std::int64_t round) const {
  return running_sums && !exact && base_window_ == delta_window(round) && !window_exact_;
}

// The total in float64; with running sums it becomes the base, without it restarts at zero.
void OutEdge::fill_total(SendBuffer& b, bool running_sums) {
  b.dtype = kDtypeFloat64Total;
  if (!running_sums) {  // what was pushed since the last send, which restarts at zero
    b.totals = std::make_shared<const std::vector<double>>(since_base_);
    std::fill(since_base_.begin(), since_base_.end(), 0.0);
    total_w_ = 0.0;
    return;
  }
  // The base is sent as it stands: it changes only here, after the buffers that hold the last
  // one have been released, or else on a copy (a W1 peer held two 5.4 MB copies per out-edge).
  for (auto& other : buffers_) {
    if (other->totals != base_) continue;
    if (other->chunks_on_wire.load(std::memory_order_acquire) != 0) {
      base_ = std::make_shared<std::vector<double>>(*base_);
      break;
    }
    other->totals.reset();
  }
  auto& base = *base_;
  for (std::size_t k = 0; k < base.size(); ++k) base[k] += since_base_[k];
  std::fill(since_base_.begin(), since_base_.end(), 0.0);
  b.totals = base_;
}

void OutEdge::fill_delta(SendBuffer& b) const {
  b.dtype = kDtypeFloat32Delta;
  b.totals.reset();
  b.deltas.resize(since_base_.size());
  for (std::size_t k = 0; k < since_base_.size(); ++k) {
    b.deltas[k] = static_cast<float>(since_base_[k]);
  }
}

bool OutEdge::busy() const {
  return std::any_of(buffers_.begin(), buffers_.end(), [](const auto& b) {
    return b->chunks_on_wire.load(std::memory_order_acquire) != 0;
  });
}

std::size_t OutEdge::state_bytes() const {
  std::size_t bytes = (base_->capacity() + since_base_.capacity()) * sizeof(double);
  for (const auto& b : buffers_) {
    if (b->totals && b->totals != base_) bytes += b->totals->capacity() * sizeof(double);
    bytes += b->deltas.capacity() * sizeof(float);
  }
  return bytes;
}

InEdge::InEdge(std::size_t n, std::uint32_t chunks, std::uint64_t epoch)
    : epoch_(epoch),
      base_(n, 0.0),
      delta_(n, 0.0f),
      sequence_(chunks, -1),
      base_sequence_(chunks, -1) {}

Applied InEdge::apply(bool running_sums, const Chunk& c, std::span<double> x, double& w) {
  if (!running_sums) {  // plain push-sum: every message's mass, as it comes
    SGP_ENFORCE(c.dtype == kDtypeFloat64Total, "plain push-sum carries float64 totals only");
    const auto* values = reinterpret_cast<const double*>(c.payload.data());
    const std::size_t count = c.payload.size() / sizeof(double);
    for (std::size_t k = 0; k < count; ++k) x[c.offset + k] += values[k];
    if (c.index == 0) w += c.weight;
    return Applied::yes;
  }
  if (const auto verdict = admit(c); verdict != Applied::yes) return verdict;
  double* to = x.data() + c.offset;
  take_change(c, [to](std::size_t k, double dx) { to[k] += dx; });
  apply_weight(c.sequence, c.weight, w);
  return Applied::yes;
}

Applied InEdge::apply_to_z(bool running_sums, const Chunk& c, const HeldMass& held) {
  SGP_ENFORCE(c.offset == 0 && sequence_.size() == 1, "apply_to_z takes whole totals only");
  if (running_sums) {
    if (const auto verdict = admit(c); verdict != Applied::yes) return verdict;
  } else {
    SGP_ENFORCE(c.dtype == kDtypeFloat64Total, "plain push-sum carries float64 totals only");
  }
  const double before = held.w;
  const double change = running_sums ? weight_change(c.sequence, c.weight) : c.weight;
  const double after = before + change;
  if (after == 0.0 && change == 0.0) return Applied::repeat;  // no weight held or sent: no mass
  if (!(after > 0.0) || !std::isfinite(after)) return Applied::bad_weight;
  if (running_sums) {
    take_change_into_z(c, held, before, after);
    apply_weight(c.sequence, c.weight, held.w);
  } else {
    const auto* mass = reinterpret_cast<const double*>(c.payload.data());
    const double inverse = 1.0 / after;
    for (std::size_t k = 0; k < held.z.size(); ++k) {
      take_mass(held.z[k], held.residual[k], before, inverse, mass[k]);
    }
    held.w = after;
  }
  return Applied::yes;
}

Applied InEdge::admit(const Chunk& c) const {
  if (c.sequence <= sequence_[c.index]) return Applied::repeat;
  if (c.dtype == kDtypeFloat32Delta) {
    const std::int64_t base = base_sequence_[c.index];
    if (base < 0 || delta_window(base) != delta_window(c.sequence)) return Applied::no_base;
  }
  return Applied::yes;
}

// What this edge applied so far is base + delta. A total adds its difference from that and
// becomes the base; a delta on the same base adds only the deltas' difference (exact in double).
template <class Take>
void InEdge::take_change(const Chunk& c, Take take) {
  double* base = base_.data() + c.offset;
  float* delta = delta_.data() + c.offset;
  if (c.dtype == kDtypeFloat32Delta) {
    const auto* next = reinterpret_cast<const float*>(c.payload.data());
    const std::size_t count = c.payload.size() / sizeof(float);
    for (std::size_t k = 0; k < count; ++k) {
      take(k, static_cast<double>(next[k]) - static_cast<double>(delta[k]));
      delta[k] = next[k];
    }
  } else {
    const auto* total = reinterpret_cast<const double*>(c.payload.data());
    const std::size_t count = c.payload.size() / sizeof(double);
    for (std::size_t k = 0; k < count; ++k) {
      take(k, (total[k] - base[k]) - static_cast<double>(delta[k]));
      base[k] = total[k];
      delta[k] = 0.0f;
    }
  }
  record(c);
}

void InEdge::take_change_into_z(const Chunk& c, const HeldMass& held, double before, double after) {
  if (c.dtype == kDtypeFloat32Delta) {
    take_deltas(reinterpret_cast<const float*>(c.payload.data()), delta_.data(), held.z.data(),
                held.residual.data(), held.z.size(), before, after);
  } else {
    take_totals(reinterpret_cast<const double*>(c.payload.data()), base_.data(), delta_.data(),
                held.z.data(), held.residual.data(), held.z.size(), before, after);
  }
  record(c);
}

void InEdge::record(const Chunk& c) {
  if (c.dtype != kDtypeFloat32Delta) base_sequence_[c.index] = c.sequence;
  sequence_[c.index] = c.sequence;
}

std::size_t InEdge::state_bytes() const {
  return base_.capacity() * sizeof(double) + delta_.capacity() * sizeof(float);
}

// The weight is taken once per sequence (with the first of its chunks to arrive).
double InEdge::weight_change(std::int64_t sequence, double weight) const {
  return sequence <= weight_sequence_ ? 0.0 : weight - applied_w_;
}

void InEdge::apply_weight(std::int64_t sequence, double weight, double& w) {
  if (sequence <= weight_sequence_) return;
  weight_sequence_ = sequence;
  w += weight - applied_w_;
  applied_w_ = weight;
}

}  // namespace sgp::gossip
