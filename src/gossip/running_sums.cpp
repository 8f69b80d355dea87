#include "sgp/gossip/running_sums.hpp"

#include <algorithm>

namespace sgp::gossip {

OutEdge::OutEdge(std::size_t n, std::uint64_t epoch) : epoch_(epoch), total_(n, 0.0) {
  for (auto& b : buffers_) {
    b = std::make_shared<SendBuffer>();
    b->values.resize(n);
  }
}

void OutEdge::push(double coefficient, std::span<const double> x, double w) {
  for (std::size_t k = 0; k < total_.size(); ++k) total_[k] += coefficient * x[k];
  total_w_ += coefficient * w;
}

std::shared_ptr<SendBuffer> OutEdge::snapshot(bool running_sums, int chunks, double& weight_out) {
  for (auto& b : buffers_) {
    if (b->chunks_on_wire.load(std::memory_order_acquire) != 0) continue;
    std::copy(total_.begin(), total_.end(), b->values.begin());
    weight_out = total_w_;
    if (!running_sums) {
      std::fill(total_.begin(), total_.end(), 0.0);
      total_w_ = 0.0;
    }
    b->chunks_on_wire.store(chunks, std::memory_order_release);
    return b;
  }
  return nullptr;
}

bool OutEdge::busy() const {
  return std::any_of(buffers_.begin(), buffers_.end(), [](const auto& b) {
    return b->chunks_on_wire.load(std::memory_order_acquire) != 0;
  });
}

InEdge::InEdge(std::size_t n, std::uint32_t chunks, std::uint64_t epoch)
    : epoch_(epoch), applied_(n, 0.0), chunk_sequence_(chunks, -1) {}

bool InEdge::apply(bool running_sums, std::uint32_t chunk, std::int64_t sequence,
                   std::size_t offset, std::span<const double> values, double weight,
                   std::span<double> x, double& w) {
  if (!running_sums) {  // plain push-sum: every message's mass, as it comes
    for (std::size_t k = 0; k < values.size(); ++k) x[offset + k] += values[k];
    if (chunk == 0) w += weight;
    return true;
  }
  if (sequence <= chunk_sequence_[chunk]) return false;
  chunk_sequence_[chunk] = sequence;
  double* applied = applied_.data() + offset;
  for (std::size_t k = 0; k < values.size(); ++k) {
    x[offset + k] += values[k] - applied[k];
    applied[k] = values[k];
  }
  if (sequence > weight_sequence_) {
    weight_sequence_ = sequence;
    w += weight - applied_w_;
    applied_w_ = weight;
  }
  return true;
}

}  // namespace sgp::gossip
