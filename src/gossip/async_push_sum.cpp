#include "sgp/gossip/async_push_sum.hpp"

#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <thread>
#include <tuple>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "failure_detector.hpp"
#include "sgp/error.hpp"
#include "sgp/gossip/acked_pushes.hpp"
#include "sgp/gossip/running_sums.hpp"
#include "sgp/topology/repair.hpp"

namespace sgp::gossip {

namespace {

using std::chrono::milliseconds;

// finish(): after every live peer is done, mix until this peer's ratio z + r has settled: it
// moved by less than kSettled (relative) in kSettledRounds rounds that applied something, with
// no round between them that moved it more, and at least kFinalRounds rounds, at most
// kMaxFinalRounds unless mixing is stalled (settle()), or --timeout-ms.
// kSettled is far below float32's precision: the float32 deltas of the peers' last totals left
// z a few units in its last place apart, a norm-relative 1e-7, which z moving by less than 1e-5
// could not see (4 Python ranks under 20% drops ended 1 unit apart in 2 of 45 runs). Once all
// are done, totals travel in float64 and z + r keeps 2^-48: it settles to float64 rounding.
constexpr int kFinalRounds = 5, kMaxFinalRounds = 500, kSettledRounds = 3;
constexpr double kSettled = 1e-9;
// finish(): how many --timeout-ms to wait for news (a peer done or excluded) before finishing
// anyway. A live peer still training is not news: a 4x straggler took 28 s longer than the
// others, who gave up after one time-out (10 s), stopped mixing with it and ended 1e-2 apart.
// Dead peers are the failure detector's; this only guards against a lost notice.
constexpr int kFinishPatience = 10;
constexpr milliseconds kJoinRetry{200};             // between join requests
constexpr milliseconds kFlushLimit{2000};           // longest wait for sends at the end
constexpr milliseconds kMinPace{2}, kMaxPace{200};  // gossip-only rounds while finishing

// ||ratio - last|| / ||ratio|| for the ratio a peer holds, z + r in float64 (HeldMass), which
// then becomes `last`: one float64 copy of the model, not two (5.4 MB less for W1 at the end of
// a run, where a peer's peak memory is).
double change_of_ratio(const float* z, std::span<const float> residual, std::vector<double>& last) {
  const bool first = last.empty();
  last.resize(residual.size());
  double moved = 0.0, size = 0.0;
  for (std::size_t k = 0; k < last.size(); ++k) {
    const double ratio = static_cast<double>(z[k]) + static_cast<double>(residual[k]);
    const double d = ratio - last[k];
    moved += d * d;
    size += ratio * ratio;
    last[k] = ratio;
  }
  if (first) return std::numeric_limits<double>::infinity();
  return size > 0.0 ? std::sqrt(moved / size) : std::sqrt(moved);
}

// The deadline's floor: long enough for a busy host's scheduling hiccups and a straggler's
// pauses, short enough to notice a dead peer well before the cap.
// Generations are 16-bit serial numbers (RFC 1982): `a` is older than `b` when b is less than
// half the circle ahead, so a long run's renormalisations may wrap around.
bool older_generation(std::uint32_t a, std::uint32_t b) {
  return static_cast<std::int16_t>(static_cast<std::uint16_t>(b - a)) > 0;
}

// A peer whose w is below this keeps its mass for the round instead of pushing (a self weight
// of 1, which conserves mass). A peer that runs ahead of its in-neighbours (started first, or
// pushing to a dead peer not yet excluded) would otherwise halve w round after round: 4^-10
// after ten rounds on exponential-8, where the running totals' rounding swamps what is still
// mixed and, soon after, denormal arithmetic is 100 times slower. Restarting from z with w = 1
// instead (as an exclusion must) changes the total mass: consensus ended 3e-3 to 1.7e-2 away
// from the exact mean. Some peer always holds w >= 1 (they sum to N), so mixing goes on.
constexpr double kHoldMassBelow = 1e-3;

// A live peer can be silent far longer than its usual gap: a test-set evaluation, a page-in,
// 8 peers sharing 2 cores. With a floor of a tenth of --timeout-ms, 8 W1 peers on 2 cores
// excluded each other within seconds; half of it leaves the adaptive part for the slow side.
milliseconds detector_floor(milliseconds cap) {
  return std::min(cap, std::max(milliseconds(500), cap / 2));
}

// The rank that sponsors `joiner` in this view: the first live rank after it; -1 if none.
int first_live_after(const Membership& membership, int joiner) {
  const int n = membership.size();
  for (int k = 1; k < n; ++k) {
    const int r = (joiner + k) % n;
    if (membership.live(r)) return r;
  }
  return -1;
}

// CPU seconds of the calling thread (RoundProfile: what a pass costs on a shared host).
double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

bool contains(const std::vector<int>& ranks, int rank) {
  return std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
}

}  // namespace

AsyncPushSum::AsyncPushSum(compute::Backend& backend, topology::Schedule schedule,
                           transport::Transport& transport, float* x, std::size_t n,
                           PushSumConfig config)
    : backend_(backend),
      schedule_(std::move(schedule)),
      mixing_(schedule_),
      transport_(transport),
      x_(x),
      n_(n),
      config_(config),
      rank_(transport.rank()),
      // One message per total, not chunks: x and w of a total must be applied together. With
      // chunks, a peer whose w had been drained applied a send's w and first chunk while later
      // chunks were still on the way: z of those chunks went to ~0 for an iteration, and W1
      // training diverged. (config.chunk_elements is for the synchronous engine.)
      chunking_(n, 0),
      host_z_(backend.kind() == compute::DeviceKind::cpu ? 0 : n),
      given_(host_z_.size()),
      z_(host_z_.empty() ? x : host_z_.data()),
      residual_(n, 0.0f),
      membership_(schedule_.num_peers()),
      detector_(std::make_unique<FailureDetector>(schedule_.num_peers(),
                                                  detector_floor(config.timeout), config.timeout)),
      done_(schedule_.num_peers(), false),
      join_requested_(schedule_.num_peers(), false) {
  SGP_ENFORCE(config_.gossip_every >= 1, "gossip_every must be >= 1");
  config_.acked_pushes = config_.acked_pushes && config_.running_sums;  // else plain push-sum
  if (!host_z_.empty()) {
    backend_.download(host_z_.data(), x_, n_ * sizeof(float));
    given_ = host_z_;
  }
  const auto now = Clock::now();
  for (int r : mixing_.all_in_neighbors(rank_)) detector_->watch(r, now);
}

AsyncPushSum::~AsyncPushSum() = default;

bool AsyncPushSum::step(std::int64_t iteration) {
  if ((iteration + 1) % config_.gossip_every != 0) return false;
  mix();
  return true;
}

void AsyncPushSum::mix() {
  const auto start = Clock::now();
  if (last_mix_) {  // the pace of this peer's rounds, for the gossip-only rounds of finish()
    // A pause (an evaluation) is not its pace: with it, a peer looked 8 times slower after each
    // evaluation, and was pushed an eighth of its share for the next 20 rounds.
    const double gap =
        std::max(0.0, std::chrono::duration<double>(start - *last_mix_).count() - paused_s_);
    mix_interval_s_ = metrics_.rounds < 2 ? gap : 0.9 * mix_interval_s_ + 0.1 * gap;
    const double busy = std::max(0.0, gap - round_wait_s_);
    busy_interval_s_ = metrics_.rounds < 2 ? busy : 0.9 * busy_interval_s_ + 0.1 * busy;
  }
  round_wait_s_ = 0.0;
  paused_s_ = 0.0;
  last_mix_ = start;
  announce_pace();
  const double taking = thread_cpu_seconds();
  take_caller_changes();
  const double pushing = thread_cpu_seconds();
  profile_.passes_s += pushing - taking;
  if (!left_ && w_ >= kHoldMassBelow) {
    const double send_before = profile_.send_s;
    push_round();
    profile_.passes_s += thread_cpu_seconds() - pushing - (profile_.send_s - send_before);
    holding_since_.reset();
  } else if (!left_) {
    hold_round();
    if (!holding_since_) holding_since_ = start;
    // Held for a whole time-out: the mass is not coming back. A dead peer is excluded and a
    // rejoined one admitted by then (both restart from z); what is left is mass lost where
    // nothing says so, as plain push-sum (--no-running-sums) loses every dropped message's.
    if (start - *holding_since_ > config_.timeout) {
      renormalise();
      holding_since_.reset();
    }
  }
  ++round_;
  ++metrics_.rounds;
  // Taken in after the push: a step moves the mass w holds here (z changes by the step, the mass
  // by w times it), and what is still in flight when it is taken misses it. Taken in before the
  // push, every total pushed to this peer waited a whole step: 8 W1 peers stepped at w 0.53 to
  // 0.58 on average (of 1) and ended 1.5 to 2 points below sgp; taken in last, 0.54 to 0.93 and
  // 0.6 point better (3 runs each).
  const double receiving = thread_cpu_seconds();
  drain();
  check_failures();
  profile_.receive_s += thread_cpu_seconds() - receiving;
  if (metrics_.rounds == 1 && !admitted_round_) {
    const auto awaiting = Clock::now();
    await_in_neighbours();
    round_wait_s_ += std::chrono::duration<double>(Clock::now() - awaiting).count();
  }
  keep_step_with_in_neighbours();
  const double giving = thread_cpu_seconds();
  give_to_caller();
  profile_.passes_s += thread_cpu_seconds() - giving;
  metrics_.apply_seconds += std::chrono::duration<double>(Clock::now() - start).count();
}

void AsyncPushSum::idle(milliseconds duration) {
  const auto start = Clock::now();
  const auto until = start + duration;
  for (auto now = start; now < until; now = Clock::now()) {
    const auto left = std::chrono::ceil<milliseconds>(until - now);
    if (auto message = transport_.receive(left)) drain(std::move(message));
  }
  drain();
  check_failures();
  metrics_.wait_seconds += std::chrono::duration<double>(Clock::now() - start).count();
}

// Peers start at different times. A peer that mixed on alone would push half its mass away
// every round and take nothing in: its w would fall geometrically, and its SGD steps (on x, so
// 1 / w times larger in z) would blow up. So the first round waits, as a synchronous round does,
// until every peer that pushes to it in that round has been heard from or excluded (the
// failure detector's cap). It sends its totals again meanwhile (running sums: a repeat costs
// nothing), so that a lost first message does not get a live peer excluded. The peers it pushes
// to in later rounds watch it too: waiting for a dead in-neighbour takes the whole cap, their
// deadline as well, so they are sent the (unchanged) totals every fifth of the detector's floor.
// Without that, 4 Python ranks whose first in-neighbour was killed before it was heard from
// excluded the waiting rank, and it excluded them: a partition, each side exit 0.
void AsyncPushSum::await_in_neighbours() {
  const std::int64_t pushed = round_ - 1;
  auto kept_alive = Clock::now();
  while (detector_->waiting_for_first_message(mixing_.in_neighbors(rank_, pushed))) {
    idle(milliseconds(5));
    if (left_) continue;
    for (const auto& e : mixing_.out_edges(rank_, pushed)) remind(e.peer);
    if (Clock::now() - kept_alive < keep_alive_every()) continue;
    kept_alive = Clock::now();
    keep_out_neighbours_watching();
  }
}

// Asynchrony's cost when nobody is slow: a peer that mixes what happens to have arrived mixes
// with in-neighbours a round or two apart, and 8 W1 peers that never waited ended 0.7 to 1.2
// points below sgp with 10x its consensus error mid-run (docs/asynchronous.md). So after its
// push a peer waits, at most --partner-wait times its own round's time without waits, for the
// in-neighbours of the round that keep pace (they delivered their previous push on this edge).
// A peer slower than 1 + --partner-wait times this one falls behind within a few rounds; once it
// is further behind than the lead allowed, it is waited for up to two of its rounds, unless it is
// a straggler (slower_by_itself). With --partner-wait 0 nobody waits.
void AsyncPushSum::keep_step_with_in_neighbours() {
  if (config_.partner_wait <= 0.0 || done_[rank_] || left_) return;
  const std::int64_t pushed = round_ - 1;
  const auto partner_missing = [&] {
    for (int j : mixing_.in_neighbors(rank_, pushed))
      if (keeps_pace_but_not_here(j, pushed)) return true;
    return false;
  };
  const auto lagging = [&] {
    for (int j : mixing_.all_in_neighbors(rank_))
      if (behind_but_not_slow(j)) return true;
    return false;
  };
  const auto start = Clock::now();
  const auto partner_until =
      start + std::chrono::duration_cast<Clock::duration>(
                  std::chrono::duration<double>(config_.partner_wait * busy_interval_s_));
  const auto lag_until = start + lag_wait_limit();
  // The deadline of what is still awaited, if anything is.
  const auto awaiting = [&](Clock::time_point now) -> std::optional<Clock::time_point> {
    if (now < lag_until && lagging()) return std::max(lag_until, partner_until);
    if (now < partner_until && partner_missing()) return partner_until;
    return std::nullopt;
  };
  if (!awaiting(start)) return;
  for (auto now = start; const auto until = awaiting(now); now = Clock::now()) {
    if (auto m = transport_.receive(std::chrono::ceil<milliseconds>(*until - now))) {
      drain(std::move(m));
    }
  }
  check_failures();
  const double waited = std::chrono::duration<double>(Clock::now() - start).count();
  round_wait_s_ += waited;
  ++metrics_.partner_waits;
  metrics_.partner_wait_seconds += waited;
  metrics_.wait_seconds += waited;
}

// The newest round in-neighbour j sent, and its pace as seen here (seconds per round between its
// messages).
void AsyncPushSum::note_round_from(int j, std::int64_t round) {
  const auto now = Clock::now();
  const auto last = last_round_from_.find(j);
  if (last != last_round_from_.end() && round > last->second) {
    const double seconds =
        std::chrono::duration<double>(now - heard_round_at_[j]).count() / (round - last->second);
    // A hiccup (one long gap) moves it by at most 60%: a peer slow for good is still seen as
    // such within a few messages.
    const auto pace = pace_from_.find(j);
    pace_from_[j] = pace == pace_from_.end()
                        ? seconds
                        : 0.8 * pace->second + 0.2 * std::min(seconds, 4.0 * pace->second);
  }
  if (last == last_round_from_.end() || round > last->second) {
    last_round_from_[j] = round;
    heard_round_at_[j] = now;
  }
}

// Whether in-neighbour j is more than kMaxLead rounds behind this peer (beyond what its edge's
// period explains) and not slower by itself: a peer that fell behind on a host shared with
// others (the ones ahead never wait, the ones behind wait for each other, so the CPU went to the
// ones ahead and the gap grew: 2 of 8 W1 peers ended 90 rounds ahead, 1.8 s before the others).
bool AsyncPushSum::behind_but_not_slow(int j) const {
  constexpr std::int64_t kMaxLead = 3;
  if (!membership_.live(j) || done_[j] || paused(j)) return false;
  const auto heard = last_round_from_.find(j);
  if (heard == last_round_from_.end()) return false;
  return round_ - 1 - heard->second > kMaxLead + mixing_.period() && !slower_by_itself(j);
}

// A straggler (issue 38's is 4 times as slow), which is not waited for: its busy time per round
// (what it said in its pace notices) three times this peer's. Not its time per round as seen
// here, which counts its waits: peers that waited for each other took 3 to 30 times the busy
// time of one that ran ahead on the CPU they left, so it counted them all as stragglers and ran
// 100 rounds ahead (in 2 of 5 calm runs of 8 W1 peers on 2 cores, 0.7 point below sgp).
bool AsyncPushSum::slower_by_itself(int j) const {
  constexpr double kSlower = 3.0;
  if (const auto busy = busy_of_.find(j); busy != busy_of_.end()) {
    return busy->second >= kSlower * busy_interval_s_;
  }
  const auto pace = pace_from_.find(j);  // before it said: its pace is all there is
  return pace != pace_from_.end() && pace->second >= kSlower * busy_interval_s_;
}

// How long a round waits for the in-neighbours that fell behind: two of their rounds (their
// pace as seen here), time to come back within the lead allowed.
AsyncPushSum::Clock::duration AsyncPushSum::lag_wait_limit() const {
  double longest = 0.0;
  for (int j : mixing_.all_in_neighbors(rank_)) {
    if (!behind_but_not_slow(j)) continue;
    const auto pace = pace_from_.find(j);
    longest = std::max(longest, pace != pace_from_.end() ? pace->second : mix_interval_s_);
  }
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(2.0 * longest));
}

// Whether in-neighbour j has not delivered its push of `round` here although it delivered the one
// before (the latest round before `round` in which j pushes to this peer).
bool AsyncPushSum::keeps_pace_but_not_here(int j, std::int64_t round) const {
  if (!membership_.live(j) || done_[j] || paused(j)) return false;
  const auto heard = last_round_from_.find(j);
  if (heard == last_round_from_.end() || heard->second >= round) return false;
  const std::int64_t oldest = std::max<std::int64_t>(0, round - mixing_.period());
  for (std::int64_t k = round - 1; k >= oldest; --k) {
    if (contains(mixing_.in_neighbors(rank_, k), j)) return heard->second >= k;
  }
  return false;
}

// A test-set evaluation takes 19 ms for mlp:64 alone, and took up to 2.5 s with 12 peers on 2
// cores: every peer evaluates at the same iteration, so all were silent past the detectors' floor
// at once, and live peers excluded each other. Running-sums repeats move no mass, and nothing is
// taken in while the caller reads z.
void AsyncPushSum::stay_heard() {
  if (left_) return;
  const auto now = Clock::now();
  if (pausing_ && now - pause_told_ >= keep_alive_every()) tell_pause();
  for (const auto& last : {last_mix_, kept_alive_})
    if (last && now - *last < keep_alive_every()) return;
  kept_alive_ = now;
  keep_out_neighbours_watching();
}

milliseconds AsyncPushSum::keep_alive_every() const {
  return std::max(milliseconds(10), detector_floor(config_.timeout) / 5);
}

// The unchanged totals to every live out-neighbour of the period (a running-sums repeat moves no
// mass): what a waiting peer sends so that their failure detectors hear from it.
void AsyncPushSum::keep_out_neighbours_watching() {
  for (int r : mixing_.all_out_neighbors(rank_))
    if (membership_.live(r)) remind(r);
}

// The engine mixes z itself, the caller's buffer on the CPU backend: what the caller changed
// there (its step, taken at z) is a change of the mass w z of w times as much, with nothing to
// do (a step moves z by the same amount whatever w is; adding it to x = w z unscaled, as
// synchronous SGP does, moves z by step / w, and a peer whose mass is mostly in flight, w << 1,
// diverges: a fast peer with 0.3 ms iterations reached w = 1e-5 in ten rounds). A device
// backend's buffer is mirrored on the host: what the caller changed since the last upload is
// added to the mirror.
void AsyncPushSum::take_caller_changes() {
  if (host_z_.empty()) return;
  thread_local std::vector<float> now;
  now.resize(n_);
  backend_.download(now.data(), x_, n_ * sizeof(float));
  for (std::size_t k = 0; k < n_; ++k) {
    host_z_[k] += now[k] - given_[k];
    given_[k] = now[k];  // taken: a second call before give_to_caller() adds nothing twice
  }
}

void AsyncPushSum::give_to_caller() {
  if (host_z_.empty()) return;
  backend_.upload(x_, host_z_.data(), n_ * sizeof(float));
  given_ = host_z_;
}

HeldMass AsyncPushSum::held() { return {{z_, n_}, residual_, w_}; }

void AsyncPushSum::push_round() {
  const auto& edges = mixing_.out_edges(rank_, round_);
  // The topology's self weight plus what a slower peer is not sent: with every peer at one pace
  // the arithmetic is exactly the schedule's, as in the simulator's AsyncPopulation.
  double keep = mixing_.self_weight(rank_, round_);
  const HeldMass mass = held();
  const double w_start = w_;
  for (const auto& e : edges) {
    if (paused(e.peer)) {  // it does not mix now: its share stays here, for when it does
      keep += e.weight;
      keep_paused_watching(e.peer);
      continue;
    }
    const double factor = pace_share(e.peer);
    if (config_.acked_pushes) {  // w falls with each push; what is not pushed stays
      if (const double share = paced_share(e.peer, factor); share > 0.0) {
        push_acked(e.peer, e.weight * share * w_start, mass);
      } else {
        say_alive(e.peer);  // not its turn: it still learns how far this peer has got
      }
      continue;
    }
    auto& edge = out_edge(e.peer);
    if (config_.running_sums) {
      double weight = 0.0;
      const auto chunks = static_cast<int>(chunking_.chunks());
      const auto buffer =
          edge.push_z_and_snapshot(e.weight * factor, mass, done_[rank_], round_, chunks, weight);
      send(e.peer, edge.epoch(), buffer, weight);
    } else {
      edge.push_z(e.weight * factor, mass);
      send_total(e.peer, edge);
    }
    if (factor < 1.0) keep += e.weight * (1.0 - factor);
  }
  if (!config_.acked_pushes) w_ *= keep;  // z stays: what a peer keeps is its z at a smaller w
}

// Pushing to a peer that mixes k times slower at the full edge weight piles the mass up there:
// it takes in k pushes for each of its own. Its w then dwarfs everyone's, and since an SGD step
// moves the mass by w times the step, the fast peers' training counted for almost nothing (a
// 16x straggler held w ~ 1 while the others sat near 1e-3). So push to it a 1/k share of the
// edge weight and keep the rest: the sums stay column-stochastic, only slower to that peer.
double AsyncPushSum::pace_share(int dest) const {
  constexpr double kAlike = 0.8;  // paces within 25% are the same (noise, an evaluation)
  const auto it = pace_of_.find(dest);
  if (it == pace_of_.end() || mix_interval_s_ <= 0.0) return 1.0;
  const double ratio = mix_interval_s_ / it->second;
  return ratio >= kAlike ? 1.0 : std::max(ratio, 1e-3);
}

// With acknowledged pushes a k times slower peer (k at least 2) gets a whole push once in k of
// the edge's turns instead of a 1/k share every turn: the mass it takes in is the same, but its
// work is per push (a W1 push is 2.7 MB to check and add), and a straggler on a tenth of a core
// spent most of it taking in the fast peers' small shares. A peer less than twice as slow (often
// only noise in the paces) still gets its share every turn, as before: skipping turns for any
// pace difference gave one calm run of 8 W1 peers 84.37% against sgp's 85.58%, which a few runs
// cannot tell from asgp's spread (84.69 to 85.62% without it), so it was not risked.
double AsyncPushSum::paced_share(int dest, double factor) {
  constexpr double kWholeBelow = 0.5;
  if (factor >= kWholeBelow) {
    push_credit_.erase(dest);
    return factor;
  }
  double& credit = push_credit_[dest];
  credit += factor;
  if (credit < 1.0) return 0.0;
  credit -= 1.0;
  return 1.0;
}

// Tells the peers that push to this one its pace when it has changed by half since last time
// (at most every 20 rounds): a few control notices per run unless the pace keeps changing. The
// first time after 3 rounds: a straggler held to a quarter of the CPU of the others mixed 11 to
// 20 rounds in a whole --work budget run, never said its pace, and took the mass (w 5.8).
void AsyncPushSum::announce_pace() {
  constexpr std::int64_t kMinRounds = 20, kFirstAfter = 3;
  const bool said = announced_interval_s_ > 0.0;
  if (metrics_.rounds < kFirstAfter || (said && round_ - announced_at_round_ < kMinRounds)) {
    return;
  }
  const auto changed = [](double now, double told) {
    return told <= 0.0 || now / told <= 2.0 / 3.0 || now / told >= 1.5;
  };
  if (!changed(mix_interval_s_, announced_interval_s_) &&
      !changed(busy_interval_s_, announced_busy_s_)) {
    return;
  }
  tell_pace();
}

void AsyncPushSum::tell_pace() {
  announced_interval_s_ = mix_interval_s_;
  announced_busy_s_ = busy_interval_s_;
  announced_at_round_ = round_;
  const auto micros = [](double seconds) {
    return std::clamp<std::int64_t>(std::llround(seconds * 1e6), 1,
                                    std::numeric_limits<std::uint32_t>::max());
  };
  ControlMessage pace{ControlKind::pace, rank_, rank_, 0, micros(mix_interval_s_)};
  pace.detail = static_cast<std::uint32_t>(micros(busy_interval_s_));
  tell_neighbours(pace);
}

void AsyncPushSum::tell_pushers(const ControlMessage& message) {
  for (int r : mixing_.all_in_neighbors(rank_))
    if (membership_.live(r)) tell(r, message);
}

// Pushers and out-neighbours: the pace notice's time per round is for the first, its busy time
// for the second (slower_by_itself).
void AsyncPushSum::tell_neighbours(const ControlMessage& message) {
  auto ranks = mixing_.all_in_neighbors(rank_);
  for (int r : mixing_.all_out_neighbors(rank_))
    if (!contains(ranks, r)) ranks.push_back(r);
  for (int r : ranks)
    if (membership_.live(r)) tell(r, message);
}

// Keeps all of (x, w) this round but still sends the unchanged totals: they tell the
// out-neighbours' failure detectors that this peer lives (a silent one is excluded) and carry
// again any earlier total that was lost.
void AsyncPushSum::hold_round() {
  ++metrics_.held_rounds;
  for (const auto& e : mixing_.out_edges(rank_, round_)) remind(e.peer);
}

OutEdge& AsyncPushSum::out_edge(int dest) {
  const std::uint64_t epoch = out_epoch(dest);
  auto& edge = out_[dest];
  if (!edge || edge->epoch() != epoch) edge = std::make_unique<OutEdge>(n_, epoch);
  return *edge;
}

std::uint64_t AsyncPushSum::out_epoch(int dest) const {
  return EdgeEpoch{membership_.incarnation(rank_), membership_.incarnation(dest), generation_}
      .pack();
}

// A peer that finished training sends float64 totals only: its last totals then carry the
// mass exactly (no float32 rounding of a delta), and the peers end at the exact mean.
void AsyncPushSum::send_total(int dest, OutEdge& edge) {
  double weight = 0.0;
  const auto chunks = static_cast<int>(chunking_.chunks());
  const auto buffer = edge.snapshot(config_.running_sums, done_[rank_], round_, chunks, weight);
  send(dest, edge.epoch(), buffer, weight);
}

// Sends a snapshot (nothing when both buffers were still on the wire: counted, nothing lost).
void AsyncPushSum::send(int dest, std::uint64_t epoch, const std::shared_ptr<SendBuffer>& buffer,
                        double weight) {
  if (!buffer) {
    ++metrics_.skipped_sends;
    return;
  }
  last_send_to_[dest] = Clock::now();
  WireHeader h;
  h.dtype = buffer->dtype;
  h.sender = rank_;
  h.round = round_;
  h.weight = weight;
  h.epoch = epoch;
  h.total = n_;
  for (std::uint32_t c = 0; c < chunking_.chunks(); ++c) {
    h.chunk = c;
    h.offset = chunking_.offset(c);
    h.count = chunking_.size(c);
    // The buffer stays alive (and busy) until the transport has released every chunk.
    send_chunk(dest, h, buffer->payload(h.offset, h.count),
               [buffer] { buffer->chunks_on_wire.fetch_sub(1, std::memory_order_acq_rel); });
  }
}

// One message: the header (its payload hash filled in here) and the payload, counted.
void AsyncPushSum::send_chunk(int dest, WireHeader& h, std::span<const std::byte> payload,
                              transport::ReleaseFn release) {
  const double start = thread_cpu_seconds();
  h.payload_hash = payload_hash(payload);
  transport_.send(dest, encode_header(h), payload, std::move(release));
  ++metrics_.messages_sent;
  metrics_.bytes_sent += kHeaderBytes + payload.size();
  profile_.send_s += thread_cpu_seconds() - start;
}

// `first` and what has arrived with it, at most kDrainTotals running totals and kDrainMessages
// messages at a time (a peer always gets to push: a straggler held to a quarter of a core, taking
// in every total its fast in-neighbours sent, never left this loop and was excluded as silent).
// Control notices do not count towards the totals: under a --work budget every peer tells every
// other its count every few iterations, and a straggler that took 16 messages a round in all fell
// ever further behind its queue, the mass of the totals in it in flight (the peers' w summed to
// 1.6 of 8 at times). A running total that a later one in the batch carries is skipped
// (superseded_in_batch); control notices are handled in their order.
void AsyncPushSum::drain(std::optional<transport::Message> first) {
  constexpr std::size_t kDrainTotals = 16, kDrainMessages = 256;
  std::vector<transport::Message> batch;
  std::size_t totals = 0;
  const auto add = [&](transport::Message m) {
    if (!is_control(m)) ++totals;
    batch.push_back(std::move(m));
  };
  if (first) add(std::move(*first));
  while (totals < kDrainTotals && batch.size() < kDrainMessages) {
    auto message = transport_.receive(milliseconds(0));
    if (!message) break;
    add(std::move(*message));
  }
  if (totals >= kDrainTotals || batch.size() >= kDrainMessages) ++metrics_.full_drains;
  const auto skip = superseded_in_batch(batch);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (skip[i]) {
      ++metrics_.superseded_messages;
    } else {
      handle(std::move(batch[i]));
    }
  }
}

// Running sums: a total from the same sender on the same edge epoch with a later round carries
// all the mass of an earlier one if it is a base (float64 total), or if both are deltas of the
// same window (a delta is taken on its window's base, which an earlier base in the batch may be:
// that one is kept). The sender is the one the transport authenticated where it did, so that a
// peer cannot get another's totals skipped; a header that does not parse is left to handle().
std::vector<bool> AsyncPushSum::superseded_in_batch(
    const std::vector<transport::Message>& batch) const {
  std::vector<bool> skip(batch.size(), false);
  if (!config_.running_sums || config_.acked_pushes) return skip;
  struct Total {
    std::size_t index;
    std::pair<int, std::uint64_t> edge;  // (sender, epoch)
    bool base;
    std::int64_t round;
  };
  std::vector<Total> totals;
  std::map<std::pair<int, std::uint64_t>, std::int64_t> newest_base;
  std::map<std::tuple<int, std::uint64_t, std::int64_t>, std::int64_t> newest_delta;  // by window
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const auto& m = batch[i];
    if (m.num_frames() == 0 || is_control(m)) continue;
    const auto h = parse_header(m.frame(0));
    if (!h || (h->dtype != kDtypeFloat64Total && h->dtype != kDtypeFloat32Delta)) continue;
    const Total t{i,
                  {m.authenticated_rank().value_or(h->sender), h->epoch},
                  h->dtype == kDtypeFloat64Total,
                  h->round};
    const auto keep_newest = [&t](auto& newest, const auto& key) {
      const auto [it, fresh] = newest.try_emplace(key, t.round);
      if (!fresh) it->second = std::max(it->second, t.round);
    };
    if (t.base) {
      keep_newest(newest_base, t.edge);
    } else {
      keep_newest(newest_delta, std::tuple{t.edge.first, t.edge.second, delta_window(t.round)});
    }
    totals.push_back(t);
  }
  for (const auto& t : totals) {
    const auto base = newest_base.find(t.edge);
    const bool later_base = base != newest_base.end() && base->second > t.round;
    const bool later_delta =
        !t.base &&
        newest_delta.at(std::tuple{t.edge.first, t.edge.second, delta_window(t.round)}) > t.round;
    skip[t.index] = later_base || later_delta;
  }
  return skip;
}

void AsyncPushSum::handle(transport::Message message) {
  if (is_control(message)) {
    auto decoded = decode_control(message, schedule_.num_peers(), rank_);
    if (auto* cause = std::get_if<RejectCause>(&decoded)) {
      reject(*cause, "a control notice");
      return;
    }
    handle_control(std::get<DecodedControl>(decoded));
    return;
  }
  // A push (float32, or float64 from a finished peer), or with running sums a float32 delta or a
  // float64 total (whatever else the header says is checked below).
  const auto head = message.num_frames() > 0 ? parse_header(message.frame(0)) : std::nullopt;
  const bool precise_push = head && head->dtype == kDtypeFloat64Mass;
  const auto dtype = config_.acked_pushes ? (precise_push ? kDtypeFloat64Mass : kDtypeFloat32Mass)
                     : head && head->dtype == kDtypeFloat32Delta && config_.running_sums
                         ? kDtypeFloat32Delta
                         : kDtypeFloat64Total;
  auto decoded = decode_message(std::move(message), chunking_, schedule_.num_peers(), rank_, dtype);
  if (auto* cause = std::get_if<RejectCause>(&decoded)) {
    reject(*cause, "a running total");
    return;
  }
  handle_data(std::move(std::get<DecodedMessage>(decoded)));
}

void AsyncPushSum::handle_data(DecodedMessage m) {
  const WireHeader& h = m.header;
  const int s = h.sender;
  const auto epoch = EdgeEpoch::unpack(h.epoch);
  // A rank restarted with --join learns its own new incarnation from its admission. Until then
  // totals addressed to it are those of its dead incarnation: applied to a fresh in-edge they
  // would count all the mass ever pushed on that edge again (a W1 joiner took w = 48).
  if (joining_ && !admitted_round_) {
    reject(RejectCause::stale_epoch, fmt::format("from rank {} before admission", s));
    return;
  }
  // A newer incarnation of the sender than we know: it rejoined, and this is how we learn it.
  if (epoch.sender_incarnation > membership_.incarnation(s)) {
    admit_incarnation(s, epoch.sender_incarnation);
  }
  if (epoch.sender_incarnation != membership_.incarnation(s) ||
      epoch.receiver_incarnation != membership_.incarnation(rank_) ||
      older_generation(epoch.generation, sender_generation_[s])) {
    reject(RejectCause::stale_epoch, fmt::format("from rank {}", s));
    return;
  }
  sender_generation_[s] = epoch.generation;  // a newer one restarts the in-edge below
  if (!membership_.live(s)) {
    reject(RejectCause::unexpected_sender,
           fmt::format("rank {} is {}", s, state_name(membership_.state(s))));
    return;
  }
  // Finite values and weight: decode_message checked. A frame's data is malloc'ed, so aligned
  // in practice; a misaligned payload is copied (a copy of every 5 MB W1 total, zero-filled
  // first, was a visible part of asgp's apply time).
  thread_local std::vector<double> aligned;
  std::span<const std::byte> payload = m.payload;
  if (reinterpret_cast<std::uintptr_t>(payload.data()) % alignof(double) != 0) {
    aligned.resize((payload.size() + sizeof(double) - 1) / sizeof(double));
    std::memcpy(aligned.data(), payload.data(), payload.size());
    payload = {reinterpret_cast<const std::byte*>(aligned.data()), payload.size()};
  }
  if (config_.acked_pushes) {
    handle_acked_push(h, payload);
    return;
  }
  auto& edge = in_[s];
  if (!edge || edge->epoch() != h.epoch) {
    edge = std::make_unique<InEdge>(n_, chunking_.chunks(), h.epoch);
  }
  detector_->heard(s, Clock::now());
  note_round_from(s, h.round);
  const InEdge::Chunk chunk{h.dtype, h.chunk, h.round, h.offset, payload, h.weight};
  switch (edge->apply_to_z(config_.running_sums, chunk, held())) {
    case Applied::yes:
      ++metrics_.messages_received;
      metrics_.bytes_received += kHeaderBytes + m.payload.size();
      return;
    case Applied::repeat:
      return;
    case Applied::no_base:
      reject(RejectCause::unknown_base, fmt::format("a delta from rank {}", s));
      return;
    case Applied::bad_weight:
      reject(RejectCause::bad_weight, fmt::format("a total from rank {}", s));
      return;
  }
}

// Who may send what (decode_control already bound the sender to the key it authenticated with,
// and notices about a rank's own doings to that rank): see on_group_notice() and on_leave().
void AsyncPushSum::handle_control(const DecodedControl& d) {
  const ControlMessage& c = d.control;
  switch (c.kind) {
    case ControlKind::exclude:
      on_group_notice(c);
      return;
    case ControlKind::admit:
      if (c.subject == rank_) {
        on_admission(d);
      } else {
        on_group_notice(c);
      }
      return;
    case ControlKind::done:
      // A done peer only mixes now, at about the pace it trained (finish()), and keeps saying
      // its pace: it is still pushed to at that pace's share (at full weight it gathered the
      // mass of faster peers, and took it with it when it died). It stays watched until it
      // leaves: one that dies while mixing is excluded like any other.
      done_[c.subject] = true;
      last_news_ = Clock::now();
      return;
    case ControlKind::join_request:
      on_join_request(c);
      return;
    case ControlKind::pace:  // also the end of a pause
      pace_of_[c.sender] = static_cast<double>(c.round) * 1e-6;
      if (c.detail > 0) busy_of_[c.sender] = static_cast<double>(c.detail) * 1e-6;
      paused_until_.erase(c.sender);
      return;
    case ControlKind::pause:  // at most one time-out: a pause longer than that is a failure
      paused_until_[c.sender] = Clock::now() + std::min(config_.timeout, milliseconds(c.round));
      return;
    case ControlKind::leave:
      on_leave(d);
      return;
    case ControlKind::progress:
      on_progress(c);
      return;
    case ControlKind::budget_spent:
      on_budget_spent(c);
      return;
    case ControlKind::push_ack:
      on_push_ack(c);
      return;
    case ControlKind::alive:  // an in-neighbour with nothing to push: it lives
      if (!membership_.live(c.sender)) return;
      detector_->heard(c.sender, Clock::now());
      note_round_from(c.sender, c.round);
      return;
    default:
      reject(RejectCause::bad_dtype,
             fmt::format("control kind {} from rank {}", static_cast<int>(c.kind), c.sender));
  }
}

// An exclusion of rank s is taken only from a live peer that observes s (s pushes to it, in the
// schedule as given or as repaired: its failure detector watches s); an admission of s only from
// its sponsor in this view (the first live rank after s) and only after s asked to join. Views
// differ for a while after a change, so a notice refused now is kept and looked at again after
// each change of membership or join request (retry_deferred).
void AsyncPushSum::on_group_notice(const ControlMessage& c) {
  if (entitled(c)) {
    apply_group_notice(c);
    return;
  }
  reject(RejectCause::not_entitled,
         fmt::format("{} of rank {} from rank {}",
                     c.kind == ControlKind::exclude ? "an exclusion" : "an admission", c.subject,
                     c.sender));
  defer(c);
}

bool AsyncPushSum::entitled(const ControlMessage& c) const {
  if (!membership_.live(c.sender)) return false;
  if (c.kind == ControlKind::exclude) return observes(c.sender, c.subject);
  return join_requested_[c.subject] && first_live_after(membership_, c.subject) == c.sender;
}

bool AsyncPushSum::observes(int observer, int subject) const {
  return contains(mixing_.all_out_neighbors(subject), observer) ||
         contains(schedule_.all_out_neighbors(subject), observer);
}

void AsyncPushSum::apply_group_notice(const ControlMessage& c) {
  if (c.kind == ControlKind::admit) {
    join_requested_[c.subject] = false;
    admit_incarnation(c.subject, c.incarnation);
    return;
  }
  if (c.subject == rank_ && c.incarnation == membership_.incarnation(rank_)) {
    throw IoError(fmt::format(
        "rank {}: rank {} declared this peer dead (nothing from it within its deadline); "
        "the others go on without it (restart it with --join to take part again)",
        rank_, c.sender));
  }
  if (membership_.apply(c.subject, PeerState::excluded, c.incarnation)) {
    membership_changed("excluded", c.subject);
  }
}

void AsyncPushSum::defer(const ControlMessage& c) {
  const auto same = [&c](const ControlMessage& k) {
    return k.kind == c.kind && k.sender == c.sender && k.subject == c.subject &&
           k.incarnation == c.incarnation;
  };
  if (std::any_of(deferred_.begin(), deferred_.end(), same)) return;
  deferred_.push_back(c);
  // Bounded whatever a peer sends: the oldest go first.
  const auto limit = static_cast<std::size_t>(2 * schedule_.num_peers());
  if (deferred_.size() > limit) deferred_.erase(deferred_.begin());
}

void AsyncPushSum::retry_deferred() {
  if (retrying_) return;  // applying one changes membership, which comes back here
  retrying_ = true;
  struct Reset {
    bool& flag;
    ~Reset() { flag = false; }
  } reset{retrying_};
  while (true) {  // each one applied may entitle others: look from the start again
    const auto it = std::find_if(deferred_.begin(), deferred_.end(),
                                 [this](const ControlMessage& c) { return entitled(c); });
    if (it == deferred_.end()) return;
    const ControlMessage c = *it;
    deferred_.erase(it);
    apply_group_notice(c);
  }
}

// A leave comes from the rank that leaves (decode_control); the mass it hands over only to its
// heir (a peer it pushes to, or, as leave() picks when it pushes to nobody, the first live rank),
// bounded like a data message, and once: only with the change from live (or done) to left.
void AsyncPushSum::on_leave(const DecodedControl& d) {
  const ControlMessage& c = d.control;
  std::optional<Mass> mass;
  if (!d.payload.empty()) {
    if (!plausible_heir(c.subject)) {
      reject(RejectCause::not_entitled, fmt::format("a hand-over from rank {}", c.subject));
      return;
    }
    mass = parse_mass(d.payload, fmt::format("a hand-over from rank {}", c.subject));
    if (!mass) return;
  }
  if (!membership_.apply(c.subject, PeerState::left, c.incarnation)) {
    if (mass) reject(RejectCause::stale_epoch, fmt::format("a hand-over from rank {}", c.subject));
    return;
  }
  if (mass) add_mass(*mass);
  membership_changed("left", c.subject);
}

bool AsyncPushSum::plausible_heir(int leaver) const {
  if (observes(rank_, leaver)) return true;
  bool pushes_in_every_phase = true;
  for (int p = 0; p < mixing_.period(); ++p) {
    pushes_in_every_phase = pushes_in_every_phase && !mixing_.out_edges(leaver, p).empty();
  }
  if (pushes_in_every_phase) return false;
  for (int r = 0; r < schedule_.num_peers(); ++r) {
    if (r != leaver && membership_.live(r)) return r == rank_;
  }
  return false;
}

// Mass handed over (admission or leave): [w as double][x as n doubles], with 0 < w <= N (the
// push-sum weights sum to N) and finite values; nothing (counted) otherwise.
std::optional<AsyncPushSum::Mass> AsyncPushSum::parse_mass(std::span<const std::byte> bytes,
                                                           const std::string& what) {
  if (bytes.size() != (n_ + 1) * sizeof(double)) {
    reject(RejectCause::bad_size, what);
    return std::nullopt;
  }
  Mass mass;
  std::memcpy(&mass.w, bytes.data(), sizeof(double));
  const double most = static_cast<double>(schedule_.num_peers()) * (1.0 + 1e-9);
  if (!std::isfinite(mass.w) || mass.w <= 0.0 || mass.w > most) {
    reject(RejectCause::bad_weight, what);
    return std::nullopt;
  }
  mass.x.resize(n_);
  std::memcpy(mass.x.data(), bytes.data() + sizeof(double), n_ * sizeof(double));
  if (!std::all_of(mass.x.begin(), mass.x.end(), [](double v) { return std::isfinite(v); })) {
    reject(RejectCause::non_finite, what);
    return std::nullopt;
  }
  return mass;
}

// (w z + x) / (w + w_mass); parse_mass() made sure that w_mass > 0.
void AsyncPushSum::add_mass(const Mass& mass) {
  take_caller_changes();  // give_to_caller() below rewrites the caller's x
  const double before = w_, after = w_ + mass.w;
  for (std::size_t k = 0; k < n_; ++k) {
    take_mass(z_[k], residual_[k], before, 1.0 / after, mass.x[k]);
  }
  w_ = after;
  give_to_caller();
}

std::vector<std::byte> AsyncPushSum::mass_payload(double share) {
  std::vector<std::byte> out((n_ + 1) * sizeof(double));
  const double w = share * w_;
  std::memcpy(out.data(), &w, sizeof(double));
  auto* x = reinterpret_cast<double*>(out.data() + sizeof(double));
  for (std::size_t k = 0; k < n_; ++k) {
    x[k] = w * (static_cast<double>(z_[k]) + static_cast<double>(residual_[k]));
  }
  return out;
}

// The first live rank after the newcomer sponsors it (several may, when their views differ:
// each gives half of its own mass, so nothing is created or lost). The others note the request:
// it entitles the sponsor's admission notice (on_group_notice).
void AsyncPushSum::on_join_request(const ControlMessage& c) {
  const int s = c.subject;
  join_requested_[s] = true;
  retry_deferred();
  if (left_ || first_live_after(membership_, s) != rank_) return;
  if (auto it = sponsored_.find(s); it != sponsored_.end() && it->second == c.incarnation) return;
  sponsored_[s] = c.incarnation;
  join_requested_[s] = false;
  take_caller_changes();
  const std::uint32_t incarnation = membership_.incarnation(s) + 1;
  admit_incarnation(s, incarnation);
  auto payload = membership_.encode();
  const auto mass = mass_payload(0.5);
  payload.insert(payload.end(), mass.begin(), mass.end());
  w_ *= 0.5;  // z stays
  give_to_caller();
  ControlMessage admit{ControlKind::admit, rank_, s, incarnation, round_};
  tell(s, admit, std::move(payload));
  tell_everyone(admit);  // the others learn the new incarnation (no payload)
  spdlog::info("rank {}: sponsored rank {} (incarnation {}) with half of its mass at round {}",
               rank_, s, incarnation, round_);
}

// Our own admission, while join() waits for it: [the sponsor's membership table][mass]. Taken
// from a sponsor that its own table names (the first live rank after us, which admits us with
// this incarnation), once per sponsor, the mass bounded as a leave's.
void AsyncPushSum::on_admission(const DecodedControl& d) {
  const ControlMessage& c = d.control;
  const std::string what = fmt::format("an admission from rank {}", c.sender);
  if (!joining_ || contains(sponsors_, c.sender)) {
    reject(RejectCause::not_entitled, what);
    return;
  }
  const std::size_t table_bytes = membership_.encode().size();
  const auto table = d.payload.size() < table_bytes
                         ? std::nullopt
                         : Membership::decode(d.payload.first(table_bytes), schedule_.num_peers());
  if (!table) {
    reject(RejectCause::bad_size, what);
    return;
  }
  if (!table->live(rank_) || table->incarnation(rank_) != c.incarnation ||
      first_live_after(*table, rank_) != c.sender) {
    reject(RejectCause::not_entitled, what);
    return;
  }
  const auto mass = parse_mass(d.payload.subspan(table_bytes), what);
  if (!mass) return;
  sponsors_.push_back(c.sender);
  if (!admitted_round_) {
    membership_ = *table;
    admitted_round_ = c.round;
    round_ = c.round;
    membership_changed("admitted", rank_);
  }
  add_mass(*mass);
}

std::int64_t AsyncPushSum::join() {
  // Nothing of our own: everything we will hold comes from sponsors.
  w_ = 0.0;  // the first sponsor's mass then sets z
  std::fill(residual_.begin(), residual_.end(), 0.0f);
  joining_ = true;
  const auto request_id = static_cast<std::uint32_t>(std::random_device{}());
  const auto deadline = Clock::now() + config_.timeout;
  while (!admitted_round_) {
    if (Clock::now() > deadline) {
      throw IoError(fmt::format("rank {}: no live peer admitted it within {} ms (--timeout-ms)",
                                rank_, config_.timeout.count()));
    }
    for (int r = 0; r < schedule_.num_peers(); ++r) {
      if (r != rank_) tell(r, {ControlKind::join_request, rank_, rank_, request_id, 0});
    }
    const auto retry = Clock::now() + kJoinRetry;
    while (!admitted_round_ && Clock::now() < retry) {
      if (auto m = transport_.receive(kJoinRetry)) handle(std::move(*m));
    }
  }
  const auto now = Clock::now();
  for (int r : mixing_.all_in_neighbors(rank_)) detector_->watch(r, now);
  spdlog::info("rank {}: admitted at round {} with weight {:.6f}", rank_, round_, w_);
  return *admitted_round_;
}

void AsyncPushSum::leave() {
  take_caller_changes();
  drain();
  int heir = -1;
  for (const auto& e : mixing_.out_edges(rank_, round_)) heir = heir < 0 ? e.peer : heir;
  if (heir < 0) {
    for (int r = 0; r < schedule_.num_peers() && heir < 0; ++r)
      if (r != rank_ && membership_.live(r)) heir = r;
  }
  const ControlMessage notice{ControlKind::leave, rank_, rank_, membership_.incarnation(rank_),
                              round_};
  if (heir >= 0) {
    tell(heir, notice, mass_payload(1.0));
    w_ = 0.0;
    std::fill(residual_.begin(), residual_.end(), 0.0f);
  }
  left_ = true;
  for (int r = 0; r < schedule_.num_peers(); ++r) {
    if (r != rank_ && r != heir) tell(r, notice);
  }
  spdlog::info("rank {}: left, handing its mass to rank {}", rank_, heir);
  wait_for_sends(Clock::now() + std::min(config_.timeout, kFlushLimit));
}

void AsyncPushSum::check_failures() {
  for (int r : detector_->overdue(Clock::now())) {
    if (membership_.live(r)) {  // done or not: a done peer still mixes until it leaves
      exclude(r, membership_.incarnation(r),
              fmt::format("nothing from it for {} ms", detector_->deadline(r).count()));
    } else {
      detector_->unwatch(r);
    }
  }
}

void AsyncPushSum::exclude(int rank, std::uint32_t incarnation, const std::string& why) {
  if (!membership_.apply(rank, PeerState::excluded, incarnation)) return;
  last_news_ = Clock::now();
  spdlog::warn("rank {}: excluding rank {} ({}); the others go on without it", rank_, rank, why);
  tell_everyone({ControlKind::exclude, rank_, rank, incarnation, round_});
  membership_changed("excluded", rank);
}

// A new incarnation of `rank` is live. If its old one was still counted live (it died, or never
// started, and nobody excluded it), what this peer pushed to it since is gone with it: the
// survivors' w can sit far below 1e-3 for good and, holding their mass, they would mix nothing
// (consensus error 0.5 after a kill and --join). So restart from z first, as an exclusion does.
void AsyncPushSum::admit_incarnation(int rank, std::uint32_t incarnation) {
  const bool replaces_unexcluded = membership_.live(rank);
  if (!membership_.apply(rank, PeerState::live, incarnation)) return;
  if (replaces_unexcluded) renormalise();
  membership_changed("joined", rank);
}

// Repairs the schedule over the live peers and watches the ones that now push to us.
void AsyncPushSum::membership_changed(const std::string& what, int rank) {
  events_.push_back({what, rank, round_});
  if (what == "excluded") renormalise();
  if (what == "left") {  // nobody will acknowledge what it did not: let go of it (W1: 2.7 MB each)
    acked_out_.erase(rank);
    acked_in_.erase(rank);
    transport_.release_peer(rank);  // and of the rings to and from it (W1: 5.4 MB each)
  }
  try {
    mixing_ = topology::repair_schedule(schedule_, membership_.live_flags());
  } catch (const InputError& e) {
    throw IoError(fmt::format("rank {}: after rank {} {}, the peers left cannot mix: {}", rank_,
                              rank, what, e.what()));
  }
  const auto now = Clock::now();
  const auto pushers = mixing_.all_in_neighbors(rank_);
  for (int r = 0; r < schedule_.num_peers(); ++r) {
    const bool pushes = std::find(pushers.begin(), pushers.end(), r) != pushers.end();
    if (!pushes) {
      detector_->unwatch(r);
    } else if (!detector_->watched(r) || r == rank) {
      detector_->watch(r, now);
    }
  }
  retry_deferred();  // a notice refused in the old view may be entitled in the new one
}

// Until a dead peer is excluded, the mass pushed to it is lost: a survivor's w can fall by
// orders of magnitude, far below the running totals on its edges, whose rounding then swamps
// the mass still mixed. So after an exclusion this
// peer restarts from its z with w = 1 and restarts its out-edges' totals (a new generation;
// receivers restart theirs when they see it). z is unchanged: every z stays a convex
// combination of the peers' models, and after an exclusion the survivors converge to the plain
// average of theirs. What was in flight on the old totals is given up.
void AsyncPushSum::renormalise() {
  if (config_.fail_stop) {
    throw IoError(fmt::format(
        "rank {}: a peer failed or mass was lost at round {} (w {:.3g}); gradient tracking is "
        "fail-stop: restarting from z would rescale the tracker, so the run stops (rerun it; a "
        "peer silent for --timeout-ms counts as failed)",
        rank_, round_, w_));
  }
  spdlog::info("rank {}: restarting from z at round {} (w was {:.3g}), generation {}", rank_,
               round_, w_, (generation_ + 1) & 0xffffu);
  w_ = 1.0;  // z (and r) stay
  generation_ = (generation_ + 1) & 0xffffu;
  out_.clear();
  acked_out_.clear();  // what they hold unacknowledged is given up with the old generation
}

void AsyncPushSum::tell(int dest, const ControlMessage& message, std::vector<std::byte> payload) {
  auto owned = std::make_shared<std::vector<std::byte>>(std::move(payload));
  const std::span<const std::byte> bytes(*owned);
  transport_.send(dest, encode_control(message), bytes, [owned] {});
}

void AsyncPushSum::tell_everyone(ControlMessage message) {
  for (int r = 0; r < schedule_.num_peers(); ++r) {
    if (r == rank_ || r == message.subject) continue;
    const auto state = membership_.state(r);
    if (state == PeerState::live) tell(r, message);
  }
}

int AsyncPushSum::live_others() const {
  int live = 0;
  for (int r = 0; r < schedule_.num_peers(); ++r) live += r != rank_ && membership_.live(r);
  return live;
}

bool AsyncPushSum::all_live_done() const {
  for (int r = 0; r < schedule_.num_peers(); ++r)
    if (membership_.live(r) && !done_[r]) return false;
  return true;
}

void AsyncPushSum::finish() {
  if (left_) return;
  done_[rank_] = true;
  tell_everyone({ControlKind::done, rank_, rank_, membership_.incarnation(rank_), round_});
  // Gossip-only rounds while others still train, at about the pace this peer trained, so that
  // waiting peers do not take the CPU from the ones still computing.
  const auto pace = std::clamp(
      std::chrono::duration_cast<milliseconds>(std::chrono::duration<double>(mix_interval_s_)),
      kMinPace, kMaxPace);
  last_news_ = Clock::now();
  while (!all_live_done()) {
    idle(pace);
    mix();
    if (Clock::now() - last_news_ > kFinishPatience * config_.timeout) {
      spdlog::warn("rank {}: no peer said it finished or was excluded for {} ms; finishing anyway",
                   rank_, (kFinishPatience * config_.timeout).count());
      break;
    }
  }
  settle(pace);
  // Going away: the others stop pushing to us (no mass handed on: this peer keeps its z).
  left_ = true;
  tell_everyone({ControlKind::leave, rank_, rank_, membership_.incarnation(rank_), round_});
  wait_for_sends(Clock::now() + std::min(config_.timeout, kFlushLimit));
  let_go_of_departed();
}

// A peer that ends after others left had pushed to some of them late (over the schedule repaired
// without an earlier leaver): its shared-memory ring to one that left before attaching it held
// the exit for the transport's linger, a second, in about one run in five of 8 W1 peers.
void AsyncPushSum::let_go_of_departed() {
  for (int r = 0; r < schedule_.num_peers(); ++r) {
    if (r == rank_ || membership_.live(r)) continue;
    transport_.discard_pending(r);
  }
}

// A fixed handful of final rounds left 8 W1 peers with a consensus error of 2e-2 (the first
// to stop froze its z while the last to finish still moved). A peer whose z no longer moves
// when its in-neighbours' totals arrive agrees with them, unless its z does not move because
// mixing is stalled: it holds its mass (w below kHoldMassBelow, pushed into a peer that died),
// or an in-neighbour has gone quiet (it may have died with the mass). Then it mixes on until the
// failure detector has excluded the dead peer (each exclusion gives it another --timeout-ms to
// agree, and restarts it from z) or the quiet one is heard again. A peer killed after it said it
// was done took in the survivors' mass; they held 2e-3 of it, saw nothing move, stopped as
// calm before excluding it and ended 2e-2 apart.
void AsyncPushSum::settle(milliseconds pace) {
  auto deadline = Clock::now() + config_.timeout;
  // Quiet: silent for longer than its usual gap and longer than a few of our rounds.
  const auto quiet_after = std::max(milliseconds(100), 8 * pace);
  int calm = 0, mixed = 0;   // rounds calm in a row; rounds not stalled
  std::vector<double> last;  // z + r as the last round left it
  change_of_ratio(z_, residual_, last);
  for (int k = 0; Clock::now() < deadline; ++k) {
    // The last one still mixing: nobody is left to agree with (a peer started 0.5 s after the
    // others mixed alone for 500 rounds, 9 s).
    if (k > 0 && live_others() == 0) return;
    const auto received = metrics_.messages_received;
    const auto changes = events_.size();
    idle(pace);
    mix();
    if (events_.size() != changes) {  // a new group: agree anew
      deadline = Clock::now() + config_.timeout;
      calm = mixed = 0;
    }
    // A round that heard nothing is neutral: over a repaired schedule an edge may come once a
    // period, and counting such rounds as unsettled kept the last two peers mixing for the
    // whole time-out although their z had stopped moving. Stalled rounds count for nothing, not
    // even towards the cap: a survivor that had held its mass for 1017 rounds until the dead
    // peer's exclusion stopped at the first round after it, 5e-3 away from the others.
    const bool stalled = w_ < kHoldMassBelow || detector_->any_quiet(Clock::now(), quiet_after);
    if (change_of_ratio(z_, residual_, last) >= kSettled) {
      calm = 0;
    } else if (!stalled && metrics_.messages_received > received) {
      ++calm;
    }
    if (stalled) continue;
    ++mixed;
    if (mixed >= kFinalRounds && calm >= kSettledRounds) return;
    if (mixed >= kMaxFinalRounds) return;
  }
}

void AsyncPushSum::wait_for_sends(Clock::time_point deadline) {
  auto busy = [this] {
    for (const auto& [dest, edge] : out_)
      if (membership_.live(dest) && edge->busy()) return true;
    for (const auto& [dest, edge] : acked_out_)
      if (membership_.live(dest) && edge->on_wire()) return true;
    return false;
  };
  while (busy() && Clock::now() < deadline) std::this_thread::sleep_for(milliseconds(1));
}

void AsyncPushSum::restore(std::int64_t round, double weight) {
  round_ = round;
  w_ = weight;
  std::fill(residual_.begin(), residual_.end(), 0.0f);
  if (!host_z_.empty()) {
    backend_.download(host_z_.data(), x_, n_ * sizeof(float));
    given_ = host_z_;
  }
}

// z + r to the nearest float: the caller's z is within half a unit in the last place of it, and
// the exact mean of peers that agree on it. In the caller's buffer itself, r is folded into z.
void AsyncPushSum::debias(float* z) {
  take_caller_changes();  // a step since the last round counts
  if (z == x_) {
    for (std::size_t k = 0; k < n_; ++k) take_mass(z_[k], residual_[k], 1.0, 1.0, 0.0);
    give_to_caller();
    return;
  }
  thread_local std::vector<float> host;
  float* out = z;
  if (!host_z_.empty()) {
    host.resize(n_);
    out = host.data();
  }
  for (std::size_t k = 0; k < n_; ++k) {
    out[k] = static_cast<float>(static_cast<double>(z_[k]) + static_cast<double>(residual_[k]));
  }
  if (out != z) backend_.upload(z, out, n_ * sizeof(float));
}

PushSumMetrics AsyncPushSum::metrics() const { return metrics_; }

std::size_t AsyncPushSum::state_bytes() const {
  std::size_t bytes =
      (host_z_.capacity() + given_.capacity() + residual_.capacity()) * sizeof(float);
  for (const auto& [dest, edge] : out_) bytes += edge->state_bytes();
  for (const auto& [sender, edge] : in_) bytes += edge->state_bytes();
  for (const auto& [dest, edge] : acked_out_) bytes += edge->state_bytes();
  return bytes;
}

void AsyncPushSum::reject(RejectCause cause, const std::string& detail) {
  const auto i = static_cast<std::size_t>(cause);
  ++metrics_.rejected[i];
  if (!logged_[i]) {
    logged_[i] = true;
    spdlog::warn("rank {}: rejected {} ({}); further ones for this cause are only counted", rank_,
                 detail, reject_cause_name(cause));
  }
}

}  // namespace sgp::gossip
