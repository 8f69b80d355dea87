#include "sgp/gossip/running_sums.hpp"

#include <algorithm>

#include "sgp/error.hpp"

namespace sgp::gossip {

std::int64_t delta_window(std::int64_t round) {
  const std::int64_t w = round / kDeltaWindowRounds;
  return round < 0 && round % kDeltaWindowRounds != 0 ? w - 1 : w;
}

std::span<const std::byte> SendBuffer::payload(std::size_t offset, std::size_t count) const {
  if (dtype == kDtypeFloat32Delta) {
    return {reinterpret_cast<const std::byte*>(deltas.data() + offset), count * sizeof(float)};
  }
  return {reinterpret_cast<const std::byte*>(totals.data() + offset), count * sizeof(double)};
}

OutEdge::OutEdge(std::size_t n, std::uint64_t epoch) : epoch_(epoch), total_(n, 0.0) {
  for (auto& b : buffers_) b = std::make_shared<SendBuffer>();
}

void OutEdge::push(double coefficient, std::span<const double> x, double w) {
  for (std::size_t k = 0; k < total_.size(); ++k) total_[k] += coefficient * x[k];
  total_w_ += coefficient * w;
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

std::shared_ptr<SendBuffer> OutEdge::push_and_snapshot(double coefficient,
                                                       std::span<const double> x, double w,
                                                       bool exact, std::int64_t round, int chunks,
                                                       double& weight_out) {
  auto b = free_buffer();
  if (!b || !sends_delta(true, exact, round)) {
    push(coefficient, x, w);
    return snapshot(true, exact, round, chunks, weight_out);
  }
  total_w_ += coefficient * w;
  weight_out = total_w_;
  b->dtype = kDtypeFloat32Delta;
  b->deltas.resize(total_.size());
  for (std::size_t k = 0; k < total_.size(); ++k) {
    total_[k] += coefficient * x[k];
    b->deltas[k] = static_cast<float>(total_[k] - base_[k]);
  }
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
  b.totals.resize(total_.size());
  std::copy(total_.begin(), total_.end(), b.totals.begin());
  if (running_sums) {
    base_ = total_;
  } else {
    std::fill(total_.begin(), total_.end(), 0.0);
    total_w_ = 0.0;
  }
}

void OutEdge::fill_delta(SendBuffer& b) const {
  b.dtype = kDtypeFloat32Delta;
  b.deltas.resize(total_.size());
  for (std::size_t k = 0; k < total_.size(); ++k) {
    b.deltas[k] = static_cast<float>(total_[k] - base_[k]);
  }
}

bool OutEdge::busy() const {
  return std::any_of(buffers_.begin(), buffers_.end(), [](const auto& b) {
    return b->chunks_on_wire.load(std::memory_order_acquire) != 0;
  });
}

std::size_t OutEdge::state_bytes() const {
  std::size_t bytes = (total_.capacity() + base_.capacity()) * sizeof(double);
  for (const auto& b : buffers_) {
    bytes += b->totals.capacity() * sizeof(double) + b->deltas.capacity() * sizeof(float);
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
  if (c.sequence <= sequence_[c.index]) return Applied::repeat;
  if (c.dtype == kDtypeFloat32Delta) {
    const std::int64_t base = base_sequence_[c.index];
    if (base < 0 || delta_window(base) != delta_window(c.sequence)) return Applied::no_base;
    apply_delta(c, x);
  } else {
    apply_total(c, x);
    base_sequence_[c.index] = c.sequence;
  }
  sequence_[c.index] = c.sequence;
  apply_weight(c.sequence, c.weight, w);
  return Applied::yes;
}

// What this edge applied so far is base + delta: add the new total's difference from it.
void InEdge::apply_total(const Chunk& c, std::span<double> x) {
  const auto* total = reinterpret_cast<const double*>(c.payload.data());
  const std::size_t count = c.payload.size() / sizeof(double);
  double* base = base_.data() + c.offset;
  float* delta = delta_.data() + c.offset;
  for (std::size_t k = 0; k < count; ++k) {
    x[c.offset + k] += (total[k] - base[k]) - static_cast<double>(delta[k]);
    base[k] = total[k];
    delta[k] = 0.0f;
  }
}

// On the same base: only the deltas' difference (exact in double).
void InEdge::apply_delta(const Chunk& c, std::span<double> x) {
  const auto* next = reinterpret_cast<const float*>(c.payload.data());
  const std::size_t count = c.payload.size() / sizeof(float);
  float* delta = delta_.data() + c.offset;
  for (std::size_t k = 0; k < count; ++k) {
    x[c.offset + k] += static_cast<double>(next[k]) - static_cast<double>(delta[k]);
    delta[k] = next[k];
  }
}

std::size_t InEdge::state_bytes() const {
  return base_.capacity() * sizeof(double) + delta_.capacity() * sizeof(float);
}

void InEdge::apply_weight(std::int64_t sequence, double weight, double& w) {
  if (sequence <= weight_sequence_) return;
  weight_sequence_ = sequence;
  w += weight - applied_w_;
  applied_w_ = weight;
}

}  // namespace sgp::gossip
