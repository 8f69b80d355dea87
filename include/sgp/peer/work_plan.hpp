#pragma once
// How far a run has got, for what follows its length: the learning rate, the evaluation points
// and the end. Per peer (--work per-peer): this peer's own iterations, `total` of them. Under a
// budget of samples (--work budget, asgp): the samples all peers together trained on, counted in
// iterations of the whole group (known samples / (peers x batch)); otherwise a fast peer would
// run through its cosine early and a straggler would still be warming up at the end.
#include <cstdint>
#include <optional>

namespace sgp::gossip {
class SampleBudget;
}

namespace sgp::peer {

class WorkPlan {
 public:
  // `budget`: the engine's, or null for a fixed count per peer. `group_batch`: the samples of one
  // iteration of every peer (peers x batch).
  WorkPlan(std::int64_t total, std::int64_t eval_every, std::int64_t group_batch,
           const gossip::SampleBudget* budget);

  // The budget of a run of `total` iterations: as many samples as per-peer work would take, so
  // that the two compare (epochs x the training set, rounded up to whole group iterations).
  static std::int64_t sample_budget(std::int64_t total, std::int64_t group_batch);

  bool budgeted() const { return budget_ != nullptr; }
  // The iteration of the schedule (learning rate) at this peer's iteration `own` (0-based).
  std::int64_t schedule_iteration(std::int64_t own) const;
  // Iterations done, of `total`, after this peer's iteration `own`: for the progress line.
  std::int64_t done_after(std::int64_t own) const;
  // Whether iteration `own` was this peer's last (the caller counted its samples already).
  bool last(std::int64_t own) const;
  // The iteration an evaluation after iteration `own` is of, if one is due: its own (per peer),
  // or the last multiple of eval_every the group's work passed, once (budget); `total` at the end.
  std::optional<std::int64_t> evaluation(std::int64_t own, bool last);

 private:
  std::int64_t group_iterations() const;

  std::int64_t total_, eval_every_, group_batch_;
  const gossip::SampleBudget* budget_;
  std::int64_t evaluated_ = 0;  // budget: the last evaluation point taken
};

}  // namespace sgp::peer
