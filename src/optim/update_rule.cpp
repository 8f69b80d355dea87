#include "sgp/optim/update_rule.hpp"

#include <cmath>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sgp/error.hpp"
#include "sgp/gossip/mixer.hpp"
#include "sgp/gossip/periodic_average.hpp"

namespace sgp::optim {

StateLayout state_layout(const config::TrainConfig& config, std::size_t parameters) {
  StateLayout l;
  l.parameters = parameters;
  l.mixed = config::info(config.algo).tracks_gradient ? 2 * parameters : parameters;
  l.total = l.mixed;
  if (config::info(config.algo).tracks_gradient) {
    l.last_gradient = l.total;
    l.total += parameters;
  }
  if (config.slow_momentum > 0.0) {
    l.slow_anchor = l.total;
    l.total += 2 * parameters;
  }
  return l;
}

std::optional<std::string> describe_update_rule(const config::TrainConfig& c) {
  std::vector<std::string> parts;
  if (c.momentum_kind == config::MomentumKind::quasi_global)
    parts.emplace_back("quasi-global momentum");
  if (c.global_average_every > 0) parts.push_back(fmt::format("PGA H={}", c.global_average_every));
  if (c.slow_momentum > 0.0) parts.push_back(fmt::format("SlowMo {}", c.slow_momentum));
  if (parts.empty()) return std::nullopt;
  return fmt::format("{}", fmt::join(parts, " + "));
}

UpdateRule::UpdateRule(const config::TrainConfig& config, compute::Backend& backend,
                       const StateLayout& layout, float* state, model::Sgd& sgd)
    : config_(config),
      backend_(backend),
      layout_(layout),
      x_(state),
      sgd_(sgd),
      z_before_(backend, config.momentum_kind == config::MomentumKind::quasi_global
                             ? layout.parameters
                             : 0) {}

void UpdateRule::start() {
  const std::size_t n = layout_.parameters;
  if (layout_.total > n) backend_.fill(x_ + n, layout_.total - n, 0.0f);
  if (layout_.slow_anchor > 0) {
    backend_.copy(x_ + layout_.slow_anchor, x_, n * sizeof(float));
  }
  tracking_started_ = false;
}

void UpdateRule::local_step(float* grads, float scale, float lr) {
  lr_ = lr;
  if (config::info(config_.algo).tracks_gradient) {
    tracking_step(grads, scale, lr);
  } else if (config_.momentum_kind == config::MomentumKind::quasi_global) {
    quasi_global_step(grads, scale, lr);
  } else {
    sgd_.step(x_, grads, lr);
  }
}

// Momentum tracking (Takezawa et al., TMLR 2023): u = the local optimizer's direction (v <- beta v
// + g; u = g + beta v with Nesterov, else v; u = g without momentum), y <- y + u(t) - u(t-1)
// (y(0) = u(0)), x <- x - lr y. The trackers sum to the sum of the current directions (mixing is
// column stochastic), and u -> 0 at the optimum keeps the fixed point exact. Filtering the mixed
// tracker by an unmixed local buffer instead (v <- beta v + y) is the same rule on a fixed
// mixing, but on a time-varying one (one-peer exponential) its tracking is unstable at curvatures
// where this rule's is not (docs/optimizers.md).
void UpdateRule::tracking_step(float* g, float scale, float lr) {
  const std::size_t n = layout_.parameters;
  float* y = x_ + n;
  float* last = x_ + layout_.last_gradient;
  const model::SgdOptions& o = sgd_.options();
  if (o.weight_decay > 0.0f) backend_.axpy(o.weight_decay * scale, x_, g, n);  // wd z, z = scale x
  const float gain = tracker_gain();
  if (tracking_started_) {
    backend_.axpy(-gain, last, y, n);
  } else {
    // y(0) = u(0): start() cleared y, which may since hold tracker mass from peers that started
    // first (asgp's engine mixes the buffer in place as totals arrive): kept, not cleared again.
    tracking_started_ = true;
  }
  // last <- u: the optimizer's fused step with lr -1 on zeros leaves +u there and updates v.
  backend_.fill(last, n, 0.0f);
  backend_.sgd_update(last, g, sgd_.velocity().data(), n, {-1.0f, o.momentum, 0.0f, o.nesterov});
  backend_.axpy(gain, last, y, n);
  backend_.axpy(-lr / gain, y, x_, n);  // agt: z moves by lr times the numerator w (y / w)
}

// What y takes of a direction's change so that the tracker numerators sum to the current
// directions u. The synchronous engines' caller holds the numerators [x; y]: 1. asgp's caller
// holds [z; y / w] and the engine adds w times the caller's change to the numerator, at the w it
// gave the caller (nothing moves w between its round and the next round's take but
// AsyncPushSum::idle(), which the trainer does not call): 1 / w. The step then follows the
// numerator w (y / w), so that z moves by lr y: a peer whose mass is mostly in flight (asgp's w
// falls to 1e-3) would otherwise take a change 1 / w times too large into its step and diverge
// (seen in tests/test_async_tracking.cpp). At a fixed point y = 0 either way.
float UpdateRule::tracker_gain() const {
  if (!engine_ || engine_->z_scale()) return 1.0f;
  const double w = engine_->weight();
  SGP_ENFORCE(w > 0.0 && std::isfinite(1.0 / w), "gradient tracking at push-sum weight {}", w);
  return static_cast<float>(1.0 / w);
}

// z_half = z - lr d with d = g + beta m (Nesterov: d = g + beta (beta m + g)), written back as
// x = w z_half, i.e. x <- x - (lr / scale) d. z_before keeps z for the buffer's update.
void UpdateRule::quasi_global_step(float* g, float scale, float lr) {
  const std::size_t n = layout_.parameters;
  const float beta = sgd_.options().momentum, wd = sgd_.options().weight_decay;
  float* m = sgd_.velocity().data();
  float* z = z_before_.data();
  backend_.copy(z, x_, n * sizeof(float));
  if (scale != 1.0f) backend_.scale(z, n, scale);
  if (wd > 0.0f) backend_.axpy(wd, z, g, n);
  if (sgd_.options().nesterov) {
    backend_.scale(g, n, 1.0f + beta);
    backend_.axpy(beta * beta, m, g, n);
  } else {
    backend_.axpy(beta, m, g, n);
  }
  backend_.axpy(-lr / scale, g, x_, n);
}

// m <- beta m + (1 - beta) (z_before - z_after) / lr (the (1 - beta) damping is the paper's).
// A step with lr 0 moved nothing of its own: the buffer is kept.
void UpdateRule::update_quasi_global_buffer() {
  if (lr_ == 0.0f) return;
  const std::size_t n = layout_.parameters;
  const float beta = sgd_.options().momentum;
  // asgp's caller x is z after every round (no scale): z_after = scale * x.
  const auto after = engine_ ? engine_->z_scale().value_or(1.0) : 1.0;
  float* change = z_before_.data();
  backend_.axpy(-static_cast<float>(after), x_, change, n);
  float* m = sgd_.velocity().data();
  backend_.scale(m, n, beta);
  backend_.axpy((1.0f - beta) / lr_, change, m, n);
}

bool UpdateRule::mix(std::int64_t iteration) {
  const bool mixed = engine_ && engine_->step(iteration);
  if (config_.momentum_kind == config::MomentumKind::quasi_global) update_quasi_global_buffer();
  if (layout_.slow_anchor > 0 &&
      gossip::exact_average_round(iteration, config_.global_average_every)) {
    slow_momentum_step();
  }
  return mixed;
}

// After an exact average z_avg (x, w = 1): u <- beta_s u + (z_prev - z_avg) / lr, then every
// peer takes z_new = z_prev - lr u, and z_prev <- z_new. Every peer computes the same bits.
void UpdateRule::slow_momentum_step() {
  const std::size_t n = layout_.parameters;
  float* anchor = x_ + layout_.slow_anchor;
  float* u = anchor + n;
  if (lr_ == 0.0f) {  // nothing moved: the average is the new anchor
    backend_.copy(anchor, x_, n * sizeof(float));
    return;
  }
  const auto beta = static_cast<float>(config_.slow_momentum);
  backend_.axpy(-1.0f, x_, anchor, n);  // anchor = z_prev - z_avg
  backend_.scale(u, n, beta);
  backend_.axpy(1.0f / lr_, anchor, u, n);
  backend_.axpy(-lr_, u, anchor, n);   // z_prev - z_avg - lr u
  backend_.axpy(1.0f, x_, anchor, n);  // z_new
  backend_.copy(x_, anchor, n * sizeof(float));
}

}  // namespace sgp::optim
