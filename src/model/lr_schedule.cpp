#include "sgp/model/lr_schedule.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>

#include "sgp/error.hpp"

namespace sgp::model {

std::span<const NamedValue<LrDecay>> names(LrDecay) {
  static constexpr std::array<NamedValue<LrDecay>, 3> table = {{
      {LrDecay::constant, "constant", "the base rate throughout"},
      {LrDecay::step, "step", "multiplied by --lr-gamma at each of --lr-milestones"},
      {LrDecay::cosine, "cosine", "cosine decay to zero at the last iteration"},
  }};
  return table;
}

std::span<const NamedValue<LrScaling>> names(LrScaling) {
  static constexpr std::array<NamedValue<LrScaling>, 2> table = {{
      {LrScaling::none, "none", "lr as given"},
      {LrScaling::linear, "linear", "lr * (batch * peers) / 256, the large-batch rule"},
  }};
  return table;
}

double linearly_scaled_lr(double base_lr, std::int64_t global_batch, std::int64_t reference_batch) {
  SGP_ENFORCE(global_batch > 0 && reference_batch > 0, "batch sizes must be positive");
  return base_lr * static_cast<double>(global_batch) / static_cast<double>(reference_batch);
}

LrSchedule::LrSchedule(LrScheduleOptions options) : options_(std::move(options)) {
  SGP_ENFORCE(options_.base_lr >= 0.0, "learning rate must be >= 0, got {}", options_.base_lr);
  SGP_ENFORCE(options_.warmup_iterations >= 0, "warm-up must be >= 0");
  std::sort(options_.milestones.begin(), options_.milestones.end());
}

double LrSchedule::at(std::int64_t iteration) const {
  const auto& o = options_;
  if (iteration < o.warmup_iterations) {
    return o.base_lr * static_cast<double>(iteration + 1) /
           static_cast<double>(o.warmup_iterations);
  }
  switch (o.decay) {
    case LrDecay::constant:
      return o.base_lr;
    case LrDecay::step: {
      const auto passed = std::upper_bound(o.milestones.begin(), o.milestones.end(), iteration) -
                          o.milestones.begin();
      return o.base_lr * std::pow(o.gamma, static_cast<double>(passed));
    }
    case LrDecay::cosine: {
      const double span =
          static_cast<double>(std::max<std::int64_t>(1, o.total_iterations - o.warmup_iterations));
      const double t =
          std::clamp(static_cast<double>(iteration - o.warmup_iterations) / span, 0.0, 1.0);
      return o.base_lr * 0.5 * (1.0 + std::cos(std::numbers::pi * t));
    }
  }
  return o.base_lr;
}

}  // namespace sgp::model
