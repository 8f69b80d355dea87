// asgp's pauses (Mixer::begin_pause, end_pause): a peer that stops mixing for a while (a
// test-set evaluation, about 0.3 s of a core for W1, 1 s and more with 8 peers on 2 cores) tells
// the peers that push to it, and they keep their pushes until it mixes again.
//
// Why: asynchronous peers reach an evaluation at different times. Those still training pushed
// to the evaluating ones every round, took nothing back from them, and kept pushing half of
// what they had left: in 8 W1 peers on 2 cores, the two peers that ran ahead held w = 1e-3 for
// half a second while 6 evaluated (their steps, which move the mass by w times the step, counted
// for almost nothing), the peers' weights summed to 0.4 of 8 (the rest queued at the evaluating
// peers), and the average model ended 1.6 points below sgp's.
//
// The pause notice's `round` is how long it holds (milliseconds, three keep-alive periods); the
// pausing peer renews it from stay_heard() while the pause lasts, so a peer that dies in a pause
// is pushed to again, and excluded, as any other. Its end is a pace notice, which also corrects
// the pace: the pause is left out of the time between rounds.
#include <chrono>

#include "sgp/gossip/async_push_sum.hpp"
#include "sgp/gossip/running_sums.hpp"

namespace sgp::gossip {

void AsyncPushSum::begin_pause() {
  if (left_ || pausing_) return;
  pausing_ = true;
  pause_began_ = Clock::now();
  tell_pause();
}

void AsyncPushSum::end_pause() {
  if (!pausing_) return;
  pausing_ = false;
  paused_s_ += std::chrono::duration<double>(Clock::now() - pause_began_).count();
  if (!left_) tell_pace();
}

void AsyncPushSum::tell_pause() {
  pause_told_ = Clock::now();
  const auto holds = 3 * keep_alive_every();
  tell_pushers({ControlKind::pause, rank_, rank_, 0, holds.count()});
}

bool AsyncPushSum::paused(int dest) const {
  const auto it = paused_until_.find(dest);
  return it != paused_until_.end() && Clock::now() < it->second;
}

// A paused peer's failure detector still watches this one: it is sent the unchanged total (a
// running-sums repeat moves no mass) once per keep-alive period.
void AsyncPushSum::keep_paused_watching(int dest) {
  const auto last = last_send_to_.find(dest);
  if (last != last_send_to_.end() && Clock::now() - last->second < keep_alive_every()) return;
  remind(dest);
}

}  // namespace sgp::gossip
