// asgp's budget of samples (--work budget; SampleBudget in mixer.hpp): each peer's running count
// travels in progress notices, every peer keeps the newest count of every (rank, incarnation),
// and the run's work is spent when the sum a peer knows reaches the budget.
//
// Why the known sum never exceeds the true one: every entry is a count its peer did reach (counts
// only grow, and a stale or replayed notice never lowers an entry), so a peer stops only once at
// least the budget was trained on. How far past it the run goes: when the first peer P learns the
// budget is spent, each other peer j has taken at most what it did since its last notice that P
// had (less than one notice step plus one batch), and it stops at the first round after P's
// budget_spent arrives (one batch more, plus what it takes while the notice is in flight).
#include <algorithm>
#include <numeric>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "sgp/error.hpp"
#include "sgp/gossip/async_push_sum.hpp"

namespace sgp::gossip {

namespace {

// Notices per peer over a run: a peer announces its count each time it grew by a hundredth of
// its fair share of the budget, so what others do not know of it yet stays that small.
constexpr std::int64_t kNoticesPerPeer = 100;

}  // namespace

SampleBudget* AsyncPushSum::sample_budget() { return config_.sample_budget > 0 ? this : nullptr; }

void AsyncPushSum::count_samples(std::int64_t taken) {
  SGP_ENFORCE(config_.sample_budget > 0, "count_samples without a sample budget");
  auto& own = samples_of_[{rank_, membership_.incarnation(rank_)}];
  SGP_ENFORCE(taken >= own, "the count of samples fell from {} to {}", own, taken);
  own = taken;
  const std::int64_t step =
      std::max<std::int64_t>(1, config_.sample_budget / (kNoticesPerPeer * schedule_.num_peers()));
  if (taken - announced_samples_ >= step) {
    announced_samples_ = taken;
    tell_everyone({ControlKind::progress, rank_, rank_, membership_.incarnation(rank_), taken});
  }
  check_budget();
}

std::int64_t AsyncPushSum::samples_known() const {
  return std::accumulate(samples_of_.begin(), samples_of_.end(), std::int64_t{0},
                         [](std::int64_t sum, const auto& entry) { return sum + entry.second; });
}

bool AsyncPushSum::budget_spent() const { return budget_spent_; }

// A count of 0 says "ready". Said again at the detector's keep-alive pace with the unchanged
// totals, so that no out-neighbour takes the wait for silence (a notice is no data message).
void AsyncPushSum::await_all_started() {
  SGP_ENFORCE(config_.sample_budget > 0, "await_all_started without a sample budget");
  samples_of_.try_emplace({rank_, membership_.incarnation(rank_)}, 0);
  const auto deadline = Clock::now() + config_.timeout;
  while (!all_started() && Clock::now() < deadline) {
    tell_everyone({ControlKind::progress, rank_, rank_, membership_.incarnation(rank_),
                   samples_of_[{rank_, membership_.incarnation(rank_)}]});
    keep_out_neighbours_watching();
    for (const auto until = Clock::now() + keep_alive_every();
         !all_started() && Clock::now() < std::min(until, deadline);) {
      idle(std::chrono::milliseconds(5));
    }
  }
  if (!all_started()) {
    spdlog::warn("rank {}: not every peer said it was ready within {} ms; counting anyway", rank_,
                 config_.timeout.count());
  }
}

// Every live rank has a count here (0 from its ready notice, or more).
bool AsyncPushSum::all_started() const {
  for (int r = 0; r < schedule_.num_peers(); ++r) {
    if (!membership_.live(r)) continue;
    const auto it = samples_of_.lower_bound({r, 0});
    if (it == samples_of_.end() || it->first.first != r) return false;
  }
  return true;
}

// The newest count wins: a replayed or reordered notice with a smaller one changes nothing. A
// rank that rejoined counts afresh under its new incarnation; what its dead one did stays.
void AsyncPushSum::on_progress(const ControlMessage& c) {
  if (config_.sample_budget == 0) {
    reject(RejectCause::not_entitled, fmt::format("a progress notice from rank {} in a run "
                                                  "without a sample budget",
                                                  c.sender));
    return;
  }
  auto& count = samples_of_[{c.sender, c.incarnation}];
  count = std::max(count, c.round);
  check_budget();
}

// Only a claim of at least the budget is one (a peer's word is all there is: the sender is the
// rank its key or header names, as for every notice).
void AsyncPushSum::on_budget_spent(const ControlMessage& c) {
  if (config_.sample_budget == 0 || c.round < config_.sample_budget) {
    reject(RejectCause::not_entitled,
           fmt::format("rank {} says the budget is spent at {} samples (budget {})", c.sender,
                       c.round, config_.sample_budget));
    return;
  }
  budget_spent_ = true;
}

// The first time this peer's own sum reaches the budget it tells everyone, so that the others
// stop at their next round instead of when their own (older) sums get there.
void AsyncPushSum::check_budget() {
  if (budget_spent_) return;
  const std::int64_t known = samples_known();
  if (known < config_.sample_budget) return;
  budget_spent_ = true;
  tell_everyone({ControlKind::budget_spent, rank_, rank_, membership_.incarnation(rank_), known});
}

}  // namespace sgp::gossip
