// asgp's engine (AsyncPushSum) with peers as threads over in-process transports: running sums
// reach the exact mean under drops, duplicates and reordering where plain push-sum is biased; a
// dead peer is excluded and the survivors agree; a joining peer takes half a sponsor's mass and
// a leaving one hands all of its mass on, so the total is conserved exactly.
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <functional>
#include <thread>

#include "sgp/compute/cpu_backend.hpp"
#include "sgp/gossip/async_push_sum.hpp"
#include "sgp/gossip/control_message.hpp"
#include "sgp/transport/faulty_transport.hpp"
#include "sgp/transport/inproc_network.hpp"
#include "sgp/transport/inproc_transport.hpp"
#include "support/gossip_test_support.hpp"

using namespace sgp;
using namespace std::chrono_literals;

namespace {

struct AsyncResult {
  std::vector<float> z;
  double weight = 0.0;
  std::uint64_t held_rounds = 0;
  std::uint64_t finish_rounds = 0;  // rounds mixed in finish()
  gossip::PushSumMetrics metrics;
  std::vector<double> weights;                                    // w after each of its rounds
  std::vector<std::chrono::steady_clock::time_point> round_ends;  // ... and when
  std::vector<gossip::MembershipEvent> events;
  std::string error;
};

// running_sums: lost messages cost nothing, by acknowledged pushes (the default) or running sums;
// false: plain push-sum.
gossip::PushSumConfig async_config(bool running_sums, std::chrono::milliseconds timeout = 2000ms) {
  gossip::PushSumConfig c;
  c.mode = gossip::Mode::async;
  c.running_sums = running_sums;
  c.timeout = timeout;
  return c;
}

// Each edge's running total instead of acknowledged pushes (--no-acked-pushes).
gossip::PushSumConfig running_sums_config(std::chrono::milliseconds timeout = 2000ms) {
  auto c = async_config(true, timeout);
  c.acked_pushes = false;
  return c;
}

// Peer `rank`'s life: `rounds` rounds paced 1 ms apart, then finish(). `before_round` may change
// the caller's x (which holds z: an SGD step), finish early, or crash (no finish, nothing said);
// an EngineHook may also call the engine (as a trainer does between rounds).
enum class Next { mix, finish, crash };
using RoundHook = std::function<Next(int rank, int round, std::vector<float>& x)>;
using EngineHook =
    std::function<Next(int rank, int round, std::vector<float>& x, gossip::AsyncPushSum& engine)>;

// A rank's own settings, where they differ from the others'.
using ConfigOfRank = std::function<gossip::PushSumConfig(int rank)>;

std::vector<AsyncResult> run_async_engines(const topology::Schedule& s,
                                           const std::vector<transport::Transport*>& transports,
                                           std::size_t dim, int rounds,
                                           const ConfigOfRank& config_of,
                                           const EngineHook& before_round) {
  const int n = s.num_peers();
  std::vector<AsyncResult> out(n);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        compute::CpuBackend backend(1);
        auto x = testing::initial_vector(rank, n, dim);
        gossip::AsyncPushSum engine(backend, s, *transports[rank], x.data(), dim, config_of(rank));
        for (int k = 0; k < rounds; ++k) {
          const auto next = before_round(rank, k, x, engine);
          if (next == Next::crash) return;
          if (next == Next::finish) break;
          engine.idle(1ms);
          engine.mix();
          out[rank].weights.push_back(engine.weight());
          out[rank].round_ends.push_back(std::chrono::steady_clock::now());
        }
        const auto rounds_before = engine.metrics().rounds;
        engine.finish();
        out[rank].finish_rounds = engine.metrics().rounds - rounds_before;
        out[rank].metrics = engine.metrics();
        out[rank].z.resize(dim);
        engine.debias(out[rank].z.data());
        out[rank].weight = engine.weight();
        out[rank].held_rounds = engine.metrics().held_rounds;
        out[rank].events = engine.events();
      } catch (const std::exception& e) {
        out[rank].error = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

std::vector<AsyncResult> run_async_engines(const topology::Schedule& s,
                                           const std::vector<transport::Transport*>& transports,
                                           std::size_t dim, int rounds,
                                           const gossip::PushSumConfig& cfg,
                                           const EngineHook& before_round) {
  return run_async_engines(
      s, transports, dim, rounds, [&cfg](int) { return cfg; }, before_round);
}

std::vector<AsyncResult> run_async(const topology::Schedule& s,
                                   const std::vector<transport::Transport*>& transports,
                                   std::size_t dim, int rounds, const gossip::PushSumConfig& cfg,
                                   RoundHook before_round = {}) {
  return run_async_engines(
      s, transports, dim, rounds, cfg,
      [&before_round](int rank, int round, std::vector<float>& x, gossip::AsyncPushSum&) {
        return before_round ? before_round(rank, round, x) : Next::mix;
      });
}

// A process killed at some point after arm(k): its k-th send from then on is its last; after
// that it sends and receives nothing, says nothing, and its engine runs on alone.
class DiesLater final : public transport::Transport {
 public:
  explicit DiesLater(transport::Transport& inner) : inner_(inner) {}
  void arm(int sends) { left_ = sends; }
  int rank() const override { return inner_.rank(); }
  void send(int dest, std::span<const std::byte> header, std::span<const std::byte> payload,
            transport::ReleaseFn on_release) override {
    if (left_ == 0) {
      on_release();
      return;
    }
    if (left_ > 0) --left_;
    inner_.send(dest, header, payload, std::move(on_release));
  }
  std::optional<transport::Message> receive(std::chrono::milliseconds timeout) override {
    if (left_ != 0) return inner_.receive(timeout);
    std::this_thread::sleep_for(std::min(timeout, std::chrono::milliseconds(50)));
    return std::nullopt;
  }
  void wake() override { inner_.wake(); }
  void discard_pending(int dest) override { inner_.discard_pending(dest); }

 private:
  transport::Transport& inner_;
  int left_ = -1;  // -1: not armed (one thread: the peer's own)
};

// The median w over the second half of the rounds of every rank but `except`.
double median_weight_in_second_half(const std::vector<AsyncResult>& out, int except) {
  std::vector<double> w;
  for (int r = 0; r < static_cast<int>(out.size()); ++r) {
    if (r == except) continue;
    const auto& weights = out[r].weights;
    w.insert(w.end(), weights.begin() + static_cast<std::ptrdiff_t>(weights.size() / 2),
             weights.end());
  }
  std::ranges::nth_element(w, w.begin() + static_cast<std::ptrdiff_t>(w.size() / 2));
  return w[w.size() / 2];
}

bool excluded(const AsyncResult& result, int rank) {
  for (const auto& e : result.events)
    if (e.what == "excluded" && e.rank == rank) return true;
  return false;
}

double max_relative_distance(const std::vector<float>& z, const std::vector<double>& mean) {
  double worst = 0.0;
  for (std::size_t d = 0; d < z.size(); ++d) {
    worst = std::max(worst, std::abs(z[d] - mean[d]) / std::abs(mean[d]));
  }
  return worst;
}

std::vector<double> as_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

struct Peers {
  explicit Peers(int n) : network(n) {
    for (int r = 0; r < n; ++r)
      inner.push_back(std::make_unique<transport::InProcTransport>(network, r));
  }
  std::vector<transport::Transport*> with_faults(const transport::FaultSpec& spec) {
    std::vector<transport::Transport*> out;
    for (auto& t : inner) {
      faulty.push_back(
          std::make_unique<transport::FaultyTransport>(*t, spec, gossip::is_control_header));
      out.push_back(faulty.back().get());
    }
    return out;
  }
  std::uint64_t dropped() const {
    std::uint64_t count = 0;
    for (const auto& f : faulty) count += f->counts().dropped;
    return count;
  }
  std::vector<transport::Transport*> plain() {
    std::vector<transport::Transport*> out;
    for (auto& t : inner) out.push_back(t.get());
    return out;
  }
  transport::InProcNetwork network;
  std::vector<std::unique_ptr<transport::InProcTransport>> inner;
  std::vector<std::unique_ptr<transport::FaultyTransport>> faulty;
};

}  // namespace

TEST_CASE("running sums reach the exact mean under drops, duplicates and reordering") {
  const int n = 6;
  const std::size_t dim = 64;
  const auto s = testing::make_schedule(testing::Graph::exponential, n);
  const auto mean = testing::exact_mean(n, dim);
  const transport::FaultSpec faults{0.05, 0.01, 0.05, 0ms, 1};
  Peers with_sums(n), without(n);
  const auto exact = run_async(s, with_sums.with_faults(faults), dim, 300, running_sums_config());
  const auto plain = run_async(s, without.with_faults(faults), dim, 300, async_config(false));
  double plain_worst = 0.0;
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    REQUIRE(exact[r].error.empty());
    REQUIRE(plain[r].error.empty());
    CHECK(max_relative_distance(exact[r].z, mean) < 1e-6);
    plain_worst = std::max(plain_worst, max_relative_distance(plain[r].z, mean));
  }
  CHECK(with_sums.dropped() > 0);
  MESSAGE("plain push-sum under the same faults: max |z - mean| / |mean| = " << plain_worst);
  // The bias lost and doubled mass leaves: 1e-3 to 1e-2 as a rule, but a drop biases the mean
  // only while the peers still disagree, and a run whose drops came late ended at 7.2e-5 (CI,
  // under load). Asked for: 10 times the running sums' bound above.
  CHECK(plain_worst > 1e-5);
}

TEST_CASE("acknowledged pushes reach the exact mean under drops, duplicates and reordering") {
  const int n = 6;
  const std::size_t dim = 64;
  const auto s = testing::make_schedule(testing::Graph::exponential, n);
  const auto mean = testing::exact_mean(n, dim);
  const transport::FaultSpec faults{0.1, 0.02, 0.1, 0ms, 3};
  Peers peers(n);
  const auto out = run_async(s, peers.with_faults(faults), dim, 300, async_config(true));
  std::uint64_t resent = 0;
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    REQUIRE(out[r].error.empty());
    // As close as running sums get (the test above), though a tenth of the pushes was lost.
    CHECK(max_relative_distance(out[r].z, mean) < 1e-6);
    resent += out[r].metrics.resent_pushes;
  }
  CHECK(peers.dropped() > 0);
  CHECK(resent >=
        peers.dropped() / 2);  // a lost push is sent again (a copy lost too is resent again)
}

// Peers that start apart: the early ones run ahead of their in-neighbours and their w falls
// (a quarter kept per round on exponential-8). They used to restart from z with w = 1 below
// w = 1e-6, which changed the total mass: real processes ended 3e-3 to 1.7e-2 from the mean.
// Now such a peer keeps its mass for the round instead (a self weight of 1): nothing is lost.
TEST_CASE("peers started apart still reach the exact mean: a peer that ran ahead holds its mass") {
  const int n = 8;
  const std::size_t dim = 64;
  const auto s = testing::make_schedule(testing::Graph::exponential, n);
  const auto mean = testing::exact_mean(n, dim);
  const transport::FaultSpec faults{0.05, 0.01, 0.05, 0ms, 3};
  Peers peers(n);
  const auto late_start = [](int rank, int round, std::vector<float>&) {
    if (round == 0 && rank >= 4) std::this_thread::sleep_for(std::chrono::milliseconds(40 * rank));
    return Next::mix;
  };
  const auto out =
      run_async(s, peers.with_faults(faults), dim, 300, async_config(true), late_start);
  std::uint64_t held = 0;
  double total_weight = 0.0;
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    REQUIRE(out[r].error.empty());
    CHECK(max_relative_distance(out[r].z, mean) < 1e-6);
    held += out[r].held_rounds;
    total_weight += out[r].weight;
  }
  MESSAGE("rounds in which a peer held its mass: " << held << ", sum of w " << total_weight);
  CHECK(held > 0);  // the late start did make peers run ahead
}

// A peer that mixes 8 times slower than its in-neighbours took in 8 of their pushes for each of
// its own: its w piled up while theirs sat near 1e-3, and since a step moves the mass by w times
// the step, their training counted for almost nothing. Told its pace, they push it a share
// scaled to it: the fast peers keep a fair part of the mass, and the sums still reach the mean.
TEST_CASE("a slow peer's in-neighbours push to it at its pace: the mass does not pile up there") {
  const int n = 8, slow = 3, rounds = 250;
  const std::size_t dim = 16;
  const auto s = testing::make_schedule(testing::Graph::exponential, n);
  const auto mean = testing::exact_mean(n, dim);
  Peers peers(n);
  const auto straggle = [](int rank, int, std::vector<float>&) {
    if (rank == slow) std::this_thread::sleep_for(8ms);
    return Next::mix;
  };
  const auto out = run_async(s, peers.plain(), dim, rounds, async_config(true), straggle);
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    REQUIRE(out[r].error.empty());
    CHECK(max_relative_distance(out[r].z, mean) < 1e-6);
  }
  const double fast = median_weight_in_second_half(out, slow);
  const double slow_w = median_weight_in_second_half({out[slow]}, -1);
  MESSAGE("median w over the second half of the rounds: fast peers " << fast << ", slow peer "
                                                                     << slow_w);
  // (Pushing at full weight: fast 0.28 to 0.29, slow 1.76 to 1.82; at its pace 0.56 to 0.58 and
  // 0.61 to 0.64, in two runs each.)
  CHECK(fast > 0.4);
  CHECK(slow_w < 1.2);
  // Whole pushes once in k turns, not a 1/k share every turn: its work is per push. (Measured:
  // 1.03 and 1.08 pushes taken in per round of its own; 4.2 with 1/k shares.)
  const auto& m = out[slow].metrics;
  const double per_round = static_cast<double>(m.messages_received) /
                           static_cast<double>(std::max<std::uint64_t>(m.rounds, 1));
  MESSAGE("pushes the slow peer took in per round of its own: " << per_round);
  CHECK(per_round < 2.0);
}

// Until the dead peer is excluded, pushes to it drain the survivors' mass; after the exclusion
// each survivor restarts from its z with w = 1 and fresh totals, so they agree again exactly.
TEST_CASE("a dead peer is excluded by every survivor, who all finish in agreement") {
  const int n = 5;
  const std::size_t dim = 16;
  const auto s = testing::make_schedule(testing::Graph::exponential, n);
  Peers peers(n);
  // Rank 2 crashes after 20 rounds: it says nothing and sends nothing more.
  auto crash = [](int rank, int round, std::vector<float>&) {
    return rank == 2 && round == 20 ? Next::crash : Next::mix;
  };
  const auto out = run_async(s, peers.plain(), dim, 400, async_config(true, 300ms), crash);
  for (int r = 0; r < n; ++r) {
    if (r == 2) continue;
    CAPTURE(r);
    REQUIRE(out[r].error.empty());
    CHECK(excluded(out[r], 2));
    REQUIRE(out[r].z.size() == dim);
    // w restarted at 1 after the exclusion: no survivor is left with a vanishing share.
    CHECK(out[r].weight > 0.1);
    CHECK(max_relative_distance(out[r].z, as_double(out[0].z)) < 1e-6);
  }
  // What the survivors pushed to it before the exclusion was dropped when they finished: a
  // transport would otherwise hold each one's exit for its linger, trying to deliver it.
  CHECK(peers.network.pending(2) == 0);
}

// A peer that said it is done mixes on in finish() until all are done. Killed there (in CI: the
// fastest of 4 processes, 330 iterations ahead of the others), it took the survivors' mass with
// it: they held 2e-3 of their mass, saw their z no longer move, stopped as settled and ended
// 2e-2 apart, while nobody excluded it (a done peer was no longer watched). Now it stays watched,
// and settling waits while mixing is stalled: a peer that holds its mass or has a quiet
// in-neighbour mixes on until the dead one is excluded.
TEST_CASE("a peer that dies after saying it is done is excluded, and the others agree") {
  const int n = 4, victim = 2;
  const std::size_t dim = 16;
  const auto s = testing::make_schedule(testing::Graph::exponential, n);
  // Dead long before the others finish: they hold what mass they have left (w < 1e-3). A slow
  // victim is pushed to at its pace's share: the others lose less to it, still hold 1e-2 of their
  // mass when they finish, and their quiet in-neighbour keeps them settling.
  int rounds = 400, sends = 50;  // its done notices and about 45 rounds of finish()
  std::chrono::milliseconds victim_round{0};
  SUBCASE("a fast victim") {}
  SUBCASE("a slow victim") {
    rounds = 200;
    sends = 6;
    victim_round = 10ms;
  }
  CAPTURE(rounds);
  Peers peers(n);
  auto transports = peers.plain();
  DiesLater dying(*transports[victim]);
  transports[victim] = &dying;
  auto finish_early = [&](int rank, int round, std::vector<float>& x) {
    if (rank != victim) {  // the survivors train up to the end: their z differ when they stall
      x[round % dim] += static_cast<float>(rank + 1);
      return Next::mix;
    }
    std::this_thread::sleep_for(victim_round);
    if (round < 10) return Next::mix;
    dying.arm(sends);
    return Next::finish;
  };
  // A 5 s time-out: the survivors train and settle long before the detector's deadline (2.5 s),
  // and stall for more rounds than settling's cap (500): stalled rounds must not count.
  const auto out = run_async(s, transports, dim, rounds, async_config(true, 5000ms), finish_early);
  for (int r = 0; r < n; ++r) {
    if (r == victim) continue;
    CAPTURE(r);
    REQUIRE(out[r].error.empty());
    // Its out-neighbours (ranks 3 and 0) watch it. Rank 1 does not: it may settle and leave
    // before they tell it. Who excluded it restarted from z with w = 1.
    if (excluded(out[r], victim)) {
      CHECK(out[r].weight > 0.1);
    } else {
      CHECK(r == 1);
    }
    // They trained up to the end, so they agree to settling's precision (z moving by less than
    // 1e-5 a round: 1e-6 to 6e-6 apart, element by element), not to the last bits. Stopping at
    // settling's cap right after the exclusion left them 4e-2 to 0.16 apart.
    CHECK(max_relative_distance(out[r].z, as_double(out[0].z)) < 1e-4);
  }
}

// A slow peer that finished mixes on at about its own pace: pushed to at full weight, it took in
// many pushes for each of its own and gathered the faster peers' mass (what a done peer that
// dies takes with it).
TEST_CASE("a slow peer that is done is still pushed to at its pace") {
  const int n = 8, slow = 3, rounds = 300;
  const std::size_t dim = 16;
  const auto s = testing::make_schedule(testing::Graph::exponential, n);
  Peers peers(n);
  const auto slow_and_done_early = [](int rank, int round, std::vector<float>&) {
    if (rank != slow) return Next::mix;
    std::this_thread::sleep_for(10ms);
    return round == 10 ? Next::finish : Next::mix;
  };
  const auto out =
      run_async(s, peers.plain(), dim, rounds, async_config(true), slow_and_done_early);
  const auto mean = testing::exact_mean(n, dim);
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    REQUIRE(out[r].error.empty());
    CHECK(max_relative_distance(out[r].z, mean) < 1e-6);
  }
  const double fast = median_weight_in_second_half(out, slow);
  MESSAGE("the fast peers' median w while the slow one is done: " << fast);
  CHECK(fast > 0.5);
}

// Every peer evaluates the test set at the same iteration, and on a busy host that took up to
// 2.5 s (12 peers on 2 cores): all were silent past the failure detectors' floor at once, and
// live peers excluded each other. A peer that calls stay_heard() meanwhile stays in the group.
TEST_CASE("peers that pause together to evaluate stay in the group when they call stay_heard()") {
  const int n = 4;
  const std::size_t dim = 16;
  const auto s = testing::make_schedule(testing::Graph::exponential, n);
  const auto run = [&](bool stay_heard) {
    Peers peers(n);
    auto pause = [stay_heard](int rank, int round, std::vector<float>&,
                              gossip::AsyncPushSum& engine) {
      // Rank 1 alone is silent without stay_heard(): the others are heard as usual.
      if (round != 30 || (!stay_heard && rank != 1)) return Next::mix;
      for (auto until = std::chrono::steady_clock::now() + 600ms;
           std::chrono::steady_clock::now() < until;) {
        std::this_thread::sleep_for(10ms);  // an evaluation's chunk
        if (stay_heard) engine.stay_heard();
      }
      return Next::mix;
    };
    // The detector's floor and cap: 300 ms, half the pause.
    return run_async_engines(s, peers.plain(), dim, 60, async_config(true, 300ms), pause);
  };
  const auto heard = run(true);
  const auto mean = testing::exact_mean(n, dim);
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    REQUIRE(heard[r].error.empty());
    for (int other = 0; other < n; ++other) CHECK_FALSE(excluded(heard[r], other));
    CHECK(max_relative_distance(heard[r].z, mean) < 1e-6);
  }
  const auto silent = run(false);
  bool excluded_1 = false;
  for (int r = 0; r < n; ++r) excluded_1 |= r != 1 && excluded(silent[r], 1);
  CHECK(excluded_1);
}

// A peer that pauses (an evaluation) while the others mix on: with begin_pause() its
// in-neighbours keep their shares until end_pause(); without, they push them into its queue
// every round and their own mass drains away (the fast peers' steps then count for nothing).
TEST_CASE("a peer's in-neighbours keep their pushes while it pauses, and all still agree") {
  const int n = 4, paused = 1, rounds = 200;
  const std::size_t dim = 16;
  const auto s = testing::make_schedule(testing::Graph::exponential, n);
  std::chrono::steady_clock::time_point pause_ends;
  const auto run = [&](bool tell) {
    Peers peers(n);
    auto pause = [&pause_ends, tell](int rank, int round, std::vector<float>&,
                                     gossip::AsyncPushSum& engine) {
      if (rank != paused || round != 20) return Next::mix;
      if (tell) engine.begin_pause();
      for (auto until = std::chrono::steady_clock::now() + 1000ms;
           std::chrono::steady_clock::now() < until;) {
        std::this_thread::sleep_for(10ms);  // an evaluation's chunk
        engine.stay_heard();
      }
      pause_ends = std::chrono::steady_clock::now();
      if (tell) engine.end_pause();
      return Next::mix;
    };
    return run_async_engines(s, peers.plain(), dim, rounds, running_sums_config(), pause);
  };
  // The others' weights after their last round before the pause ended (their round 200, or
  // about it: they mix a round a millisecond or so).
  const auto others_weight = [&pause_ends](const std::vector<AsyncResult>& out) {
    double sum = 0.0;
    for (int r = 0; r < n; ++r) {
      if (r == paused) continue;
      const auto& ends = out[r].round_ends;
      const auto before = std::lower_bound(ends.begin(), ends.end(), pause_ends) - ends.begin();
      REQUIRE(before > 0);
      sum += out[r].weights.at(static_cast<std::size_t>(before - 1));
    }
    return sum;
  };
  const auto told = run(true);
  const auto mean = testing::exact_mean(n, dim);
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    REQUIRE(told[r].error.empty());
    CHECK(max_relative_distance(told[r].z, mean) < 1e-6);
  }
  const auto untold = run(false);
  MESSAGE("the others' w at the pause's end: " << others_weight(told) << " with the pause told, "
                                               << others_weight(untold) << " without");
  // Told: 1.4 to 3.2 (what was pushed to rank 1 before the notice arrived is queued there);
  // untold: 0.002.
  CHECK(others_weight(told) > 0.5);
  CHECK(others_weight(untold) < 0.05);
}

// Rank 3 dies before it sends anything. Rank 0, whose first in-neighbour it is, waits a whole
// time-out in its first round; rank 2 hears from rank 0 only from round 1 on (rank 0 pushes to
// 0 + 2 in phase 1) and watches it with the same time-out. Rank 0 must keep rank 2's detector
// fed while it waits, or rank 2 excludes it (and rank 0 then excludes 1 and 2: a partition).
TEST_CASE("a peer waiting a time-out for a dead first in-neighbour is not excluded itself") {
  const int n = 4;
  const std::size_t dim = 8;
  const auto s = testing::make_schedule(testing::Graph::exponential, n);
  Peers peers(n);
  // Rank 0 computes for 50 ms after its first round: its round-1 push to rank 2 comes late.
  auto hooks = [](int rank, int round, std::vector<float>&) {
    if (rank == 3) return Next::crash;
    if (rank == 0 && round == 1) std::this_thread::sleep_for(50ms);
    return Next::mix;
  };
  const auto out = run_async(s, peers.plain(), dim, 60, async_config(true, 1000ms), hooks);
  for (int r = 0; r < 3; ++r) {
    CAPTURE(r);
    REQUIRE(out[r].error.empty());
    std::vector<int> excluded;
    for (const auto& e : out[r].events)
      if (e.what == "excluded") excluded.push_back(e.rank);
    CHECK(excluded == std::vector<int>{3});
    REQUIRE(out[r].z.size() == dim);
    CHECK(max_relative_distance(out[r].z, as_double(out[0].z)) < 1e-6);
  }
}

// The last peer to finish trains on alone while the others only mix; its last steps must reach
// everyone before anyone stops. Rank 0 takes `rounds` rounds with a step of +-500 in z before
// each (values are about 64); the others stop after 10. Returns the largest |z_r - z_1| / |z_1|.
static double spread_after_last_trains_on(int rounds, std::chrono::milliseconds timeout) {
  const int n = 8;
  const std::size_t dim = 16;
  const auto s = testing::make_schedule(testing::Graph::exponential, n);
  Peers peers(n);
  auto last_trains_on = [](int rank, int round, std::vector<float>& x) {
    if (rank != 0) return round == 10 ? Next::finish : Next::mix;
    for (auto& v : x) v += round % 2 == 0 ? 500.0f : -500.0f;
    return Next::mix;
  };
  const auto out =
      run_async(s, peers.plain(), dim, rounds, async_config(true, timeout), last_trains_on);
  double worst = 0.0;
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    REQUIRE(out[r].error.empty());
    worst = std::max(worst, max_relative_distance(out[r].z, as_double(out[1].z)));
  }
  return worst;
}

// Five fixed final rounds left 8 W1 peers 2e-2 apart in consensus error; here they left the
// peers about 0.5 apart (relative), where settling gets below 1e-4.
TEST_CASE("peers that finish far apart in time still end in agreement") {
  const double spread = spread_after_last_trains_on(150, 2000ms);
  MESSAGE("largest |z_r - z_1| / |z_1| after finish: " << spread);
  CHECK(spread < 1e-3);
}

// A live peer still training is not a dead one: the others wait for it past --timeout-ms
// (they gave up after one time-out, and a W1 straggler ended 1e-2 apart from them).
TEST_CASE("peers wait for a straggler that trains on longer than the time-out") {
  const double spread = spread_after_last_trains_on(1000, 300ms);
  MESSAGE("largest |z_r - z_1| / |z_1| after finish: " << spread);
  CHECK(spread < 1e-3);
}

// The last peers to finish mix over the schedule repaired for them, where an edge may come once a
// period (8 W1 peers: the last two heard from each other in one round of three). Rounds that
// heard nothing used to count as unsettled, so such peers mixed to the cap (500 rounds, 13 s)
// although their z no longer moved. Here two peers whose edges come in one phase of three each.
TEST_CASE("peers whose edges come once a period settle without running to the cap") {
  const std::size_t dim = 16;
  using topology::Push;
  const topology::Schedule s(2, {{{{1, 0.5}}, {}}, {{}, {{0, 0.5}}}, {{}, {}}},
                             {{0.5, 1.0}, {1.0, 0.5}, {1.0, 1.0}});
  Peers peers(2);
  const auto out = run_async(s, peers.plain(), dim, 30, async_config(true));
  const auto mean = testing::exact_mean(2, dim);
  for (int r = 0; r < 2; ++r) {
    CAPTURE(r);
    REQUIRE(out[r].error.empty());
    CHECK(max_relative_distance(out[r].z, mean) < 1e-4);
    MESSAGE("rounds rank " << r << " mixed in finish(): " << out[r].finish_rounds);
    CHECK(out[r].finish_rounds < 100);
  }
}

// A peer far slower than its in-neighbours finds many of their totals waiting at each round. It
// takes in only the newest of each edge (running sums: it carries the others' mass) and at most a
// batch at a time: a straggler held to a quarter of a core that applied every one never finished
// a round while its fast in-neighbours kept sending, and they excluded it as silent.
TEST_CASE("a slow peer takes in only the newest of the totals waiting for it, and still agrees") {
  const int n = 2;
  const std::size_t dim = 16;
  const auto s = testing::make_schedule(testing::Graph::ring, n);
  Peers peers(n);
  auto slow = [](int rank, int round, std::vector<float>&) {
    if (rank == 1 && round % 20 == 1) std::this_thread::sleep_for(60ms);  // rank 0: 60 rounds
    return Next::mix;
  };
  const auto out = run_async(s, peers.plain(), dim, 80, running_sums_config(), slow);
  const auto mean = testing::exact_mean(n, dim);
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    REQUIRE(out[r].error.empty());
    CHECK(max_relative_distance(out[r].z, mean) < 1e-6);
  }
  MESSAGE("rank 1 applied " << out[1].metrics.messages_received << " totals and skipped "
                            << out[1].metrics.superseded_messages);
  CHECK(out[1].metrics.superseded_messages > 20);
}

// --partner-wait: after its push a peer waits, at most that many times its own round time, for
// the round's in-neighbours that delivered their previous push (they keep pace); one that fell
// further behind is not waited for.
TEST_CASE("a peer waits for an in-neighbour that keeps pace, and not for one that fell behind") {
  const int n = 2, rounds = 80;
  const std::size_t dim = 16;
  const auto s = testing::make_schedule(testing::Graph::ring, n);
  const auto mean = testing::exact_mean(n, dim);
  const auto run = [&](double partner_wait, RoundHook hook) {
    auto config = async_config(true);
    config.partner_wait = partner_wait;
    Peers peers(n);
    const auto out = run_async(s, peers.plain(), dim, rounds, config, hook);
    for (int r = 0; r < n; ++r) {
      CAPTURE(r);
      REQUIRE(out[r].error.empty());
      CHECK(max_relative_distance(out[r].z, mean) < 1e-6);
    }
    return out[0].metrics;
  };
  SUBCASE("a hiccup of a peer that keeps pace is waited out") {
    const auto hiccups = [](int rank, int round, std::vector<float>&) {
      if (rank == 1 && round % 20 == 19) std::this_thread::sleep_for(40ms);
      return Next::mix;
    };
    const auto waiting = run(100.0, hiccups);  // up to ~100 rounds of ~1 ms
    MESSAGE("rank 0 waited in " << waiting.partner_waits << " rounds, "
                                << waiting.partner_wait_seconds << " s");
    CHECK(waiting.partner_wait_seconds > 0.05);  // of 3 hiccups of 40 ms
    CHECK(run(0.0, hiccups).partner_waits == 0);
  }
  SUBCASE("a peer 20 times slower is waited for only with a budget above its pace") {
    const auto slow = [](int rank, int, std::vector<float>&) {
      if (rank == 1) std::this_thread::sleep_for(20ms);
      return Next::mix;
    };
    const auto one_round = run(1.0, slow);
    MESSAGE("--partner-wait 1: rank 0 waited in " << one_round.partner_waits << " rounds");
    CHECK(one_round.partner_waits <= 5);
    const auto hundred_rounds = run(100.0, slow);  // enough to keep step with it
    MESSAGE("--partner-wait 100: rank 0 waited in " << hundred_rounds.partner_waits << " rounds");
    CHECK(hundred_rounds.partner_waits >= rounds / 2);
  }
  SUBCASE("a peer behind but not three times as slow is waited for once it is rounds behind") {
    // Rank 1's rounds take a little longer than rank 0's, and it has a hiccup: it falls 20
    // rounds behind at once. Without the lead's bound rank 0 waited in 8 rounds of 80. (Rounds
    // of 1 and 1.5 ms, as first, were waited for in 70 to 76 rounds alone or beside 6 busy loops,
    // but in 18 and 26 beside the test suite: scheduling delays of a few ms made rank 1 look 3
    // times as slow. Twice as long they matter half as much.)
    const auto behind = [](int rank, int round, std::vector<float>&) {
      if (rank == 1 && round == 10) std::this_thread::sleep_for(80ms);
      std::this_thread::sleep_for(rank == 0 ? 2ms : 3ms);
      return Next::mix;
    };
    const auto waited = run(1.0, behind);
    MESSAGE("--partner-wait 1: rank 0 waited in " << waited.partner_waits << " rounds");
    CHECK(waited.partner_waits >= rounds / 4);
  }
}

// A peer's rounds may be long because it waits, not because it is slow: rank 1 waits every round
// for rank 0, a peer 10 ms a round (--partner-wait 100 for rank 1 alone), and rank 2, 2 ms a
// round itself, sees rank 1 mix 5 times slower than it works. Counted as a straggler by that
// pace (as before pace notices said busy times), rank 2 never waited for it and ended its rounds
// 40 rounds ahead, as a peer ran 100 rounds ahead of 7 others that waited for each other on 2
// cores. By rank 1's busy time it is no straggler: rank 2 keeps within a few rounds of it.
TEST_CASE("a peer whose rounds are long because it waits is not left behind") {
  const int n = 3, rounds = 50;
  const std::size_t dim = 16;
  const auto s = testing::make_schedule(testing::Graph::ring, n);  // 0 -> 1 -> 2 -> 0
  const auto mean = testing::exact_mean(n, dim);
  Peers peers(n);
  const auto out = run_async_engines(
      s, peers.plain(), dim, rounds,
      [](int rank) {
        auto config = async_config(true);
        config.partner_wait = rank == 1 ? 100.0 : 1.0;
        return config;
      },
      [](int rank, int, std::vector<float>&, gossip::AsyncPushSum&) {
        std::this_thread::sleep_for(rank == 0 ? 10ms : 1ms);
        return Next::mix;
      });
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    REQUIRE(out[r].error.empty());
    CHECK(max_relative_distance(out[r].z, mean) < 1e-6);
  }
  // When rank 2 ended its last round, rank 1 had ended its 40th at least.
  const auto& waiter = out[1].round_ends;
  const auto& watcher = out[2].round_ends;
  const auto behind = std::ranges::count_if(waiter, [&](auto end) { return end > watcher.back(); });
  MESSAGE("rank 1 had " << behind << " of " << rounds << " rounds left when rank 2 ended its last");
  CHECK(behind <= 10);
}

// A peer's drain takes at most 16 totals a round, but control notices do not count: with a
// --work budget every peer tells every other its count every few iterations, and a straggler that
// took 16 messages a round in all fell ever further behind its queue of totals.
TEST_CASE("a slow peer's drain is not filled up by control notices") {
  const int n = 2;
  const std::size_t dim = 16;
  const auto s = testing::make_schedule(testing::Graph::ring, n);
  auto config = async_config(true);
  config.sample_budget = std::int64_t{1} << 50;  // progress notices are taken, never spent
  Peers peers(n);
  auto& fast = *peers.inner[0];
  std::int64_t count = 0;
  const auto hook = [&](int rank, int, std::vector<float>&) {
    if (rank == 1) std::this_thread::sleep_for(8ms);  // ~7 of rank 0's rounds
    if (rank == 0) {
      for (int k = 0; k < 3; ++k) {  // 3 notices a round: ~21 a slow round, with ~7 totals
        const auto notice =
            gossip::encode_control({gossip::ControlKind::progress, 0, 0, 0, ++count});
        fast.send(1, notice, {}, [] {});
      }
    }
    return Next::mix;
  };
  const auto out = run_async(s, peers.plain(), dim, 200, config, hook);
  const auto mean = testing::exact_mean(n, dim);
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    REQUIRE(out[r].error.empty());
    CHECK(max_relative_distance(out[r].z, mean) < 1e-6);
  }
  const auto& slow = out[1].metrics;
  MESSAGE("rank 1: " << slow.full_drains << " full drains in " << slow.rounds << " rounds");
  CHECK(slow.full_drains < 8);  // 26 of 204 when notices counted towards the 16
}

TEST_CASE("join takes half a sponsor's mass and leave hands all of it on: the total is kept") {
  const int n = 3;
  const std::size_t dim = 8;
  const auto s = testing::make_schedule(testing::Graph::complete, n);
  // With keys too: the genuine join and leave pass the checks that refuse forged ones.
  bool authenticated = false;
  SUBCASE("without keys") {}
  SUBCASE("with keys") { authenticated = true; }
  transport::InProcNetwork network(n, authenticated);
  std::vector<std::unique_ptr<transport::InProcTransport>> t;
  for (int r = 0; r < n; ++r) t.push_back(std::make_unique<transport::InProcTransport>(network, r));
  compute::CpuBackend backend(1);
  std::vector<std::vector<float>> x;
  std::vector<std::unique_ptr<gossip::AsyncPushSum>> e;
  for (int r = 0; r < n; ++r) {
    x.push_back(testing::initial_vector(r, n, dim));
    e.push_back(std::make_unique<gossip::AsyncPushSum>(backend, s, *t[r], x[r].data(), dim,
                                                       async_config(true, 300ms)));
  }
  // The first round is a rendezvous: ranks 0 and 1 meet there, and exclude rank 2, which has
  // not started, after the time-out. It will join instead.
  std::thread first_round([&] { e[1]->mix(); });
  e[0]->mix();
  first_round.join();
  for (int k = 1; k < 5; ++k)
    for (int r = 0; r < 2; ++r) e[r]->mix();
  for (int r = 0; r < 2; ++r) e[r]->idle(5ms);   // everything between 0 and 1 applied
  const double sponsor_before = e[0]->weight();  // rank 0 is the first live rank after 2
  std::atomic<bool> joined{false};
  std::int64_t join_round = -1;
  std::thread newcomer([&] {
    join_round = e[2]->join();
    joined = true;
  });
  while (!joined) {
    for (int r = 0; r < 2; ++r) e[r]->idle(1ms);
  }
  newcomer.join();
  CHECK(join_round >= 5);
  CHECK(e[2]->membership().incarnation(2) == 1);
  CHECK(e[0]->membership().incarnation(2) == 1);
  CHECK(e[0]->weight() == doctest::Approx(sponsor_before / 2).epsilon(1e-15));
  // Its half and nothing else: the totals ranks 0 and 1 pushed to rank 2's first incarnation
  // (still in its inbox) are refused until the admission names its new one. Applied, they
  // created mass: a joiner in a W1 run started with w = 48.
  CHECK(e[2]->weight() == doctest::Approx(sponsor_before / 2).epsilon(1e-15));
  // The caller's x holds z: an SGD step of 0.25 there moves z by 0.25, not by 0.25 / w (rank 0's
  // w is below 1 now; a step added to the mass unscaled made fast peers diverge).
  REQUIRE(e[0]->weight() < 0.75);
  std::vector<float> z(dim);
  e[0]->debias(z.data());
  CHECK(z == x[0]);
  const float before_step = z[3];
  x[0][3] += 0.25f;
  e[0]->debias(z.data());
  CHECK(z[3] == doctest::Approx(before_step + 0.25f).epsilon(1e-6));
  // Leaving hands everything on: what ranks 0 and 1 hold grows by exactly rank 2's weight.
  for (int r = 0; r < 2; ++r) e[r]->idle(5ms);
  const double before = e[0]->weight() + e[1]->weight(), handed = e[2]->weight();
  e[2]->leave();
  CHECK(e[2]->weight() == 0.0);
  for (int r = 0; r < 2; ++r) e[r]->idle(5ms);
  CHECK(e[0]->weight() + e[1]->weight() == doctest::Approx(before + handed).epsilon(1e-12));
  for (int r = 0; r < 2; ++r) CHECK(e[r]->membership().state(2) == gossip::PeerState::left);
}

TEST_CASE(
    "through the Mixer interface: asgp's engine leaves, its heir takes the mass; sgp's has no "
    "members") {
  const int n = 3;
  const std::size_t dim = 8;
  const auto s = testing::make_schedule(testing::Graph::ring, n);
  compute::CpuBackend backend(1);
  std::vector<std::vector<float>> x;
  for (int r = 0; r < n; ++r) x.push_back(testing::initial_vector(r, n, dim));
  Peers lock_step(n);
  gossip::PushSumConfig sync;
  const auto engine = gossip::make_mixer(backend, s, *lock_step.plain()[0], x[0].data(), dim, sync);
  CHECK(engine->membership_control() == nullptr);

  // Rank 0 leaves through the interface: rank 1, its heir on the ring, takes all of its mass.
  Peers peers(n);
  const auto cfg = async_config(true);
  std::vector<std::unique_ptr<gossip::Mixer>> e;
  for (int r = 0; r < n; ++r)
    e.push_back(gossip::make_mixer(backend, s, *peers.plain()[r], x[r].data(), dim, cfg));
  gossip::MembershipControl* leaver = e[0]->membership_control();
  REQUIRE(leaver != nullptr);
  REQUIRE(e[1]->membership_control() != nullptr);
  leaver->leave();
  CHECK(e[0]->weight() == 0.0);
  for (int k = 0; k < 100 && e[1]->weight() != 2.0; ++k) e[1]->idle(10ms);
  CHECK(e[1]->weight() == 2.0);
  const auto& seen = e[1]->membership_control()->events();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].what == "left");
  CHECK(seen[0].rank == 0);
}

TEST_CASE(
    "a float32 delta without its base, or of the wrong size, is refused, counted, not applied") {
  const std::size_t dim = 8;
  const auto s = testing::make_schedule(testing::Graph::ring, 2);
  Peers peers(2);
  compute::CpuBackend backend(1);
  auto x = testing::initial_vector(1, 2, dim);
  const auto before = x;
  gossip::AsyncPushSum engine(backend, s, *peers.plain()[1], x.data(), dim, running_sums_config());
  const std::vector<float> delta(dim, 1.0f);
  auto send = [&](std::size_t count) {  // from rank 0, which never sent a base
    gossip::WireHeader h;
    h.dtype = gossip::kDtypeFloat32Delta;
    h.round = 5;
    h.weight = 0.5;
    h.total = dim;
    h.count = count;
    const std::span<const std::byte> payload(reinterpret_cast<const std::byte*>(delta.data()),
                                             count * sizeof(float));
    h.payload_hash = gossip::payload_hash(payload);
    peers.plain()[0]->send(1, gossip::encode_header(h), payload, [] {});
  };
  send(dim);
  send(dim - 1);
  engine.idle(50ms);
  const auto rejected = engine.metrics().rejected;
  CHECK(rejected[static_cast<std::size_t>(gossip::RejectCause::unknown_base)] == 1);
  CHECK(rejected[static_cast<std::size_t>(gossip::RejectCause::bad_size)] == 1);
  CHECK(engine.weight() == 1.0);
  std::vector<float> z(dim);
  engine.debias(z.data());
  CHECK(z == before);
}
