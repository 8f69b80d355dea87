#include "sgp/gossip/acked_pushes.hpp"

#include <algorithm>
#include <cmath>

#include "sgp/error.hpp"
#include "sgp/vector_clones.hpp"

namespace sgp::gossip {
namespace {

// out = round32(share (z + r)), and (z, r) the ratio of what is left: (w (z + r) - out) / (w -
// share), in one pass. The sender gives away exactly the float32 values it sends.
// (In float64 the pass is the same with T = double.)
template <class T>
SGP_VECTOR_CLONES void give_mass(double share, float* __restrict z, float* __restrict r,
                                 T* __restrict out, std::size_t count, double before,
                                 double after) {
  const double inverse = 1.0 / after;
  for (std::size_t k = 0; k < count; ++k) {
    const double ratio = static_cast<double>(z[k]) + static_cast<double>(r[k]);
    const T m = static_cast<T>(share * ratio);
    out[k] = m;
    take_mass(z[k], r[k], before, inverse, -static_cast<double>(m));
  }
}

template <class T>
SGP_VECTOR_CLONES void take_pushed_mass(const T* __restrict mass, float* __restrict z,
                                        float* __restrict r, std::size_t count, double before,
                                        double after) {
  const double inverse = 1.0 / after;
  for (std::size_t k = 0; k < count; ++k) {
    take_mass(z[k], r[k], before, inverse, static_cast<double>(mass[k]));
  }
}

}  // namespace

std::span<const std::byte> AckedPush::payload() const {
  if (mass64) return std::as_bytes(std::span<const double>(mass64.get(), size));
  return std::as_bytes(std::span<const float>(mass.get(), size));
}

std::shared_ptr<AckedPush> AckedOutEdge::push(double share, const HeldMass& held,
                                              std::int64_t round, bool precise) {
  SGP_ENFORCE(held.z.size() == n_ && held.residual.size() == n_, "a push of another size");
  if (pushes_.size() >= kMaxUnacked) return nullptr;
  if (!pushes_.empty() && pushes_.front()->index + kAckWindow <= made_) return nullptr;
  const double before = held.w;
  const double after = before - share;
  if (!(share > 0.0) || !(after > 0.0)) return nullptr;  // nothing to move, or all of it
  auto p = std::make_shared<AckedPush>();
  p->sequence = round;
  p->index = made_++;
  p->sent_at = std::chrono::steady_clock::now();
  p->weight = share;
  if (precise) {
    p->mass64.reset(new double[n_]);
    give_mass(share, held.z.data(), held.residual.data(), p->mass64.get(), n_, before, after);
  } else {
    p->mass.reset(new float[n_]);
    give_mass(share, held.z.data(), held.residual.data(), p->mass.get(), n_, before, after);
  }
  p->size = n_;
  held.w = after;
  pushes_.push_back(p);
  return p;
}

bool AckedOutEdge::acknowledge(std::int64_t sequence) {
  const auto it = std::find_if(pushes_.begin(), pushes_.end(),
                               [sequence](const auto& p) { return p->sequence == sequence; });
  if (it == pushes_.end()) return false;
  pushes_.erase(it);
  return true;
}

std::vector<std::shared_ptr<AckedPush>> AckedOutEdge::due_again(
    std::chrono::steady_clock::time_point now, std::chrono::steady_clock::duration after) const {
  std::vector<std::shared_ptr<AckedPush>> due;
  for (const auto& p : pushes_) {
    if (p->chunks_on_wire.load(std::memory_order_acquire) == 0 && now - p->sent_at >= after) {
      due.push_back(p);
    }
  }
  return due;
}

bool AckedOutEdge::on_wire() const {
  return std::any_of(pushes_.begin(), pushes_.end(), [](const auto& p) {
    return p->chunks_on_wire.load(std::memory_order_acquire) != 0;
  });
}

std::size_t AckedOutEdge::state_bytes() const {
  std::size_t bytes = 0;
  for (const auto& p : pushes_) bytes += p->size * element_bytes(p->dtype());
  return bytes;
}

Applied AckedInEdge::apply(std::int64_t sequence, std::uint16_t dtype,
                           std::span<const std::byte> mass, double weight, const HeldMass& held) {
  const std::size_t n = held.z.size();
  SGP_ENFORCE((dtype == kDtypeFloat32Mass || dtype == kDtypeFloat64Mass) &&
                  mass.size() == n * element_bytes(dtype),
              "a push of another size or type");
  if (applied(sequence)) return Applied::repeat;
  const double before = held.w;
  const double after = before + weight;
  if (!(weight > 0.0) || !std::isfinite(after)) return Applied::bad_weight;
  if (dtype == kDtypeFloat64Mass) {
    take_pushed_mass(reinterpret_cast<const double*>(mass.data()), held.z.data(),
                     held.residual.data(), n, before, after);
  } else {
    take_pushed_mass(reinterpret_cast<const float*>(mass.data()), held.z.data(),
                     held.residual.data(), n, before, after);
  }
  held.w = after;
  if (count_ < kAckWindow) {
    recent_[count_++] = sequence;
  } else {  // forget the oldest (sequence is newer: an older one is a repeat)
    *std::min_element(recent_.begin(), recent_.end()) = sequence;
  }
  return Applied::yes;
}

bool AckedInEdge::applied(std::int64_t sequence) const {
  const auto end = recent_.begin() + static_cast<std::ptrdiff_t>(count_);
  if (std::find(recent_.begin(), end, sequence) != end) return true;
  return count_ == kAckWindow && sequence < *std::min_element(recent_.begin(), end);
}

}  // namespace sgp::gossip
