#pragma once
// Learning rate as a function of the iteration: linear warm-up, then constant, step or cosine
// decay. Optional linear scaling with the global batch (Goyal et al., the large-batch recipe).
#include <cstdint>
#include <span>
#include <vector>

#include "sgp/named_values.hpp"

namespace sgp::model {

enum class LrDecay { constant, step, cosine };
std::span<const NamedValue<LrDecay>> names(LrDecay);

// How the base rate follows the global batch (batch per peer x peers).
enum class LrScaling { none, linear };
std::span<const NamedValue<LrScaling>> names(LrScaling);

struct LrScheduleOptions {
  double base_lr = 0.1;
  std::int64_t warmup_iterations = 0;  // lr rises linearly from base/warmup to base
  LrDecay decay = LrDecay::constant;
  std::vector<std::int64_t> milestones;  // step decay: multiply by gamma at each of these
  double gamma = 0.1;
  std::int64_t total_iterations = 0;  // cosine: reaches 0 here
};

// base_lr * global_batch / reference_batch: the linear scaling rule.
double linearly_scaled_lr(double base_lr, std::int64_t global_batch,
                          std::int64_t reference_batch = 256);

class LrSchedule {
 public:
  explicit LrSchedule(LrScheduleOptions options);
  double at(std::int64_t iteration) const;
  const LrScheduleOptions& options() const { return options_; }

 private:
  LrScheduleOptions options_;
};

}  // namespace sgp::model
