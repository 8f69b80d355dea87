#include "sgp/peer/work_plan.hpp"

#include <algorithm>

#include "sgp/error.hpp"
#include "sgp/gossip/mixer.hpp"

namespace sgp::peer {

WorkPlan::WorkPlan(std::int64_t total, std::int64_t eval_every, std::int64_t group_batch,
                   const gossip::SampleBudget* budget)
    : total_(total), eval_every_(eval_every), group_batch_(group_batch), budget_(budget) {
  SGP_ENFORCE(total_ >= 1 && eval_every_ >= 1 && group_batch_ >= 1,
              "work plan of {} iterations, evaluations every {}, {} samples per group iteration",
              total_, eval_every_, group_batch_);
}

std::int64_t WorkPlan::sample_budget(std::int64_t total, std::int64_t group_batch) {
  return total * group_batch;
}

std::int64_t WorkPlan::group_iterations() const {
  return std::min(total_, budget_->samples_known() / group_batch_);
}

std::int64_t WorkPlan::schedule_iteration(std::int64_t own) const {
  return budget_ ? group_iterations() : own;
}

std::int64_t WorkPlan::done_after(std::int64_t own) const {
  return budget_ ? group_iterations() : own + 1;
}

bool WorkPlan::last(std::int64_t own) const {
  return budget_ ? budget_->budget_spent() : own + 1 == total_;
}

std::optional<std::int64_t> WorkPlan::evaluation(std::int64_t own, bool last) {
  if (!budget_) {
    if (last || (own + 1) % eval_every_ == 0) return own + 1;
    return std::nullopt;
  }
  if (last) return total_;
  const std::int64_t point = group_iterations() / eval_every_ * eval_every_;
  if (point <= evaluated_) return std::nullopt;
  evaluated_ = point;
  return point;
}

}  // namespace sgp::peer
