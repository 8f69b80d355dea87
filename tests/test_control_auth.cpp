// Control notices bound to their sender (issue 32): a key holder (a transport that the
// in-process network authenticates as its rank, as CURVE does) forges each kind of asgp notice
// and a resume offer. Every forgery is refused and counted, the receiver's state is exactly as
// before it, and a forged leave carrying a large mass cannot move the survivors' mean.
//
// The schedule is the directed ring 0 -> 1 -> 2 -> 3 -> 0: rank 1 observes rank 0 (0 pushes to
// it), rank 0 observes rank 3, rank 0 is rank 3's heir and its sponsor (the first rank after it).
#include <doctest/doctest.h>

#include <cstring>
#include <thread>

#include "sgp/compute/cpu_backend.hpp"
#include "sgp/error.hpp"
#include "sgp/gossip/async_push_sum.hpp"
#include "sgp/gossip/control_message.hpp"
#include "sgp/peer/resume_agreement.hpp"
#include "sgp/transport/inproc_network.hpp"
#include "sgp/transport/inproc_transport.hpp"
#include "sgp/transport/replay_transport.hpp"
#include "support/gossip_test_support.hpp"

using namespace sgp;
using namespace std::chrono_literals;
using gossip::ControlKind;
using gossip::ControlMessage;
using gossip::RejectCause;

namespace {

constexpr int kPeers = 4;
constexpr std::size_t kDim = 8;

gossip::PushSumConfig async_config() {
  gossip::PushSumConfig c;
  c.mode = gossip::Mode::async;
  c.timeout = 20000ms;  // nobody is declared dead while a test case runs, even on a busy host
  return c;
}

// Sends `notice` to `dest` from the key of rank `key`, whatever the notice's header says.
void forge(transport::InProcNetwork& network, int key, int dest, const ControlMessage& notice,
           const std::vector<std::byte>& payload = {}) {
  transport::InProcTransport keyed(network, key);
  keyed.send(dest, gossip::encode_control(notice), payload, {});
}

// A hand-over of mass: [w][x: kDim doubles].
std::vector<std::byte> mass(double w, double value) {
  std::vector<double> doubles(kDim + 1, value);
  doubles[0] = w;
  std::vector<std::byte> out(doubles.size() * sizeof(double));
  std::memcpy(out.data(), doubles.data(), out.size());
  return out;
}

// Everything of an engine a notice could change that can be seen from outside.
struct State {
  double w = 0.0;
  std::vector<float> z;
  std::vector<gossip::PeerState> states;
  std::vector<std::uint32_t> incarnations;
  std::size_t events = 0;
  bool operator==(const State&) const = default;
};

State state_of(gossip::AsyncPushSum& e) {
  State s;
  s.w = e.weight();
  s.z.resize(kDim);
  e.debias(s.z.data());
  for (int r = 0; r < kPeers; ++r) {
    s.states.push_back(e.membership().state(r));
    s.incarnations.push_back(e.membership().incarnation(r));
  }
  s.events = e.events().size();
  return s;
}

// Rank 0's engine alone on an authenticated network: the others need not run for it to judge a
// notice (and it never mixes, so nothing else arrives).
struct Receiver {
  Receiver()
      : network(kPeers, true),
        transport(network, 0),
        x(testing::initial_vector(0, kPeers, kDim)),
        engine(backend, testing::make_schedule(testing::Graph::ring, kPeers), transport, x.data(),
               kDim, async_config()) {}

  // Delivers what rank `key` sends and checks that it was refused for `cause` and changed
  // nothing.
  void check_refused(int key, const ControlMessage& notice, RejectCause cause,
                     const std::vector<std::byte>& payload = {}) {
    const State before = state_of(engine);
    const auto counted = engine.metrics().rejected_for(cause);
    forge(network, key, 0, notice, payload);
    engine.idle(1ms);
    CHECK(engine.metrics().rejected_for(cause) == counted + 1);
    CHECK(state_of(engine) == before);
  }

  transport::InProcNetwork network;
  transport::InProcTransport transport;
  compute::CpuBackend backend{1};
  std::vector<float> x;
  gossip::AsyncPushSum engine;
};

}  // namespace

TEST_CASE("a forged exclusion is refused: only a peer that observes the subject may exclude it") {
  Receiver r;
  // Rank 2's key, claiming rank 1 (which observes rank 0): it killed rank 0 before.
  r.check_refused(2, {ControlKind::exclude, 1, 0, 0, 5}, RejectCause::sender_mismatch);
  // Under its own name: rank 2 does not observe rank 0, nor rank 3.
  r.check_refused(2, {ControlKind::exclude, 2, 0, 0, 5}, RejectCause::not_entitled);
  r.check_refused(2, {ControlKind::exclude, 2, 3, 0, 5}, RejectCause::not_entitled);
  CHECK(r.engine.membership().live(3));
  // The rule lets the real observer through: rank 1 excluding rank 0 stops it.
  forge(r.network, 1, 0, {ControlKind::exclude, 1, 0, 0, 5});
  CHECK_THROWS_AS(r.engine.idle(1ms), IoError);
}

TEST_CASE("an exclusion refused in one view is taken once a change entitles its sender") {
  Receiver r;
  // Rank 3 does not observe rank 1 (1 pushes to 2)...
  r.check_refused(3, {ControlKind::exclude, 3, 1, 0, 5}, RejectCause::not_entitled);
  CHECK(r.engine.membership().live(1));
  // ... until rank 2 leaves: the repaired ring pushes 1 -> 3, and rank 3's word counts.
  forge(r.network, 2, 0, {ControlKind::leave, 2, 2, 0, 5});
  r.engine.idle(1ms);
  CHECK(r.engine.membership().state(2) == gossip::PeerState::left);
  CHECK(r.engine.membership().state(1) == gossip::PeerState::excluded);
}

TEST_CASE("a forged leave is refused and cannot move the survivors' mean") {
  Receiver r;
  // Claiming rank 3 (rank 0 is its heir) with a mass of a million.
  r.check_refused(2, {ControlKind::leave, 3, 3, 0, 5}, RejectCause::sender_mismatch,
                  mass(1.0, 1e6));
  r.check_refused(2, {ControlKind::leave, 2, 3, 0, 5}, RejectCause::not_entitled, mass(1.0, 1e6));
  // Its own leave, handing its mass to a peer that is not its heir (rank 2 pushes to 3).
  r.check_refused(2, {ControlKind::leave, 2, 2, 0, 5}, RejectCause::not_entitled, mass(1.0, 1e6));
  // Rank 3's own key, to its heir, but more weight than all peers hold together.
  r.check_refused(3, {ControlKind::leave, 3, 3, 0, 5}, RejectCause::bad_weight, mass(1e6, 1e6));
}

TEST_CASE("a forged done, pace or join request about another rank is refused") {
  Receiver r;
  for (auto kind : {ControlKind::done, ControlKind::pace, ControlKind::join_request}) {
    CAPTURE(static_cast<int>(kind));
    // Rank 0 sponsors rank 3: a join request in its name would cost rank 0 half its mass.
    r.check_refused(2, {kind, 3, 3, 7, 100}, RejectCause::sender_mismatch);
    r.check_refused(2, {kind, 2, 3, 7, 100}, RejectCause::not_entitled);
  }
}

TEST_CASE("a forged admission is refused: only the sponsor of a rank that asked to join") {
  Receiver r;
  r.check_refused(2, {ControlKind::admit, 3, 1, 1, 5}, RejectCause::sender_mismatch);
  // Rank 0, not 2, is rank 3's sponsor; rank 2 is rank 1's, but rank 1 never asked to join.
  r.check_refused(2, {ControlKind::admit, 2, 3, 1, 5}, RejectCause::not_entitled);
  r.check_refused(2, {ControlKind::admit, 2, 1, 1, 5}, RejectCause::not_entitled);
  // An admission of rank 0 itself, with a table and mass, when it did not ask to join.
  auto payload = gossip::Membership(kPeers).encode();
  const auto half = mass(0.5, 32.0);
  payload.insert(payload.end(), half.begin(), half.end());
  r.check_refused(2, {ControlKind::admit, 2, 0, 1, 5}, RejectCause::not_entitled, payload);
  // Once rank 1 asks (under its own key), its sponsor's admission is taken.
  forge(r.network, 1, 0, {ControlKind::join_request, 1, 1, 42, 0});
  forge(r.network, 2, 0, {ControlKind::admit, 2, 1, 1, 5});
  r.engine.idle(1ms);
  CHECK(r.engine.membership().incarnation(1) == 1);
}

TEST_CASE("done_ack and fin_ok addressed to another rank are refused") {
  Receiver r;
  r.check_refused(2, {ControlKind::done_ack, 2, 3, 0, 1}, RejectCause::not_entitled);
  r.check_refused(2, {ControlKind::fin_ok, 2, 1, 0, 1}, RejectCause::not_entitled);
}

// End to end: the four peers mix while rank 2's key sends every forgery to everyone; all of them
// end at the exact mean of their initial vectors, as without it, with nobody excluded or joined.
TEST_CASE("forgeries of every kind leave a run's result exactly as without them") {
  transport::InProcNetwork network(kPeers, true);
  const auto schedule = testing::make_schedule(testing::Graph::ring, kPeers);
  const auto mean = testing::exact_mean(kPeers, kDim);
  std::vector<std::string> errors(kPeers);
  std::vector<std::vector<float>> z(kPeers, std::vector<float>(kDim));
  std::vector<std::uint64_t> refused(kPeers);
  std::vector<std::size_t> exclusions_and_joins(kPeers);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kPeers; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        transport::InProcTransport t(network, rank);
        compute::CpuBackend backend(1);
        auto x = testing::initial_vector(rank, kPeers, kDim);
        gossip::AsyncPushSum engine(backend, schedule, t, x.data(), kDim, async_config());
        for (int k = 0; k < 300; ++k) {
          if (rank == 2 && k == 20) {
            for (int dest : {0, 1, 3}) {
              for (auto kind : {ControlKind::exclude, ControlKind::leave, ControlKind::done,
                                ControlKind::pace, ControlKind::join_request, ControlKind::admit}) {
                const int claimed = (dest + 1) % kPeers;  // dest's out-neighbour, or its heir
                forge(network, 2, dest, {kind, claimed, dest == 3 ? 0 : 3, 0, 5},
                      kind == ControlKind::leave ? mass(1.0, 1e6) : std::vector<std::byte>{});
              }
            }
          }
          engine.idle(1ms);
          engine.mix();
        }
        engine.finish();
        engine.debias(z[rank].data());
        const auto m = engine.metrics();
        refused[rank] = m.rejected_for(RejectCause::sender_mismatch) +
                        m.rejected_for(RejectCause::not_entitled);
        for (const auto& e : engine.events()) {
          exclusions_and_joins[rank] += e.what != "left";  // finish() says "left" at the end
        }
      } catch (const std::exception& e) {
        errors[rank] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < kPeers; ++rank) {
    CAPTURE(rank);
    REQUIRE(errors[rank].empty());
    CHECK(exclusions_and_joins[rank] == 0);
    if (rank != 2) CHECK(refused[rank] == 6);
    for (std::size_t d = 0; d < kDim; ++d) {
      CHECK(z[rank][d] == doctest::Approx(mean[d]).epsilon(1e-6));
    }
  }
}

TEST_CASE("a resume offer is taken from the key it came with, not from its header") {
  transport::InProcNetwork network(3, true);
  const auto ring = testing::make_schedule(testing::Graph::ring, 3);
  // Rank 0's key sends rank 2 an offer in rank 1's name (its in-neighbour): "rank 1 has only
  // iteration 7". Taken, the peers would share no iteration.
  std::string lists;
  const std::int32_t rank = 1;
  const std::uint32_t count = 1;
  const std::int64_t iteration = 7;
  lists.append(reinterpret_cast<const char*>(&rank), 4);
  lists.append(reinterpret_cast<const char*>(&count), 4);
  lists.append(reinterpret_cast<const char*>(&iteration), 8);
  const auto bytes = std::as_bytes(std::span(lists));
  forge(network, 0, 2, {ControlKind::resume_offer, 1, 1, 0, 0}, {bytes.begin(), bytes.end()});
  std::vector<std::optional<std::int64_t>> agreed(3);
  std::vector<std::string> errors(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      try {
        transport::InProcTransport t(network, r);
        transport::ReplayTransport replay(t);
        agreed[r] = peer::agree_resume_iteration(replay, ring, r, {10, 20}, 10000ms);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 3; ++r) {
    CAPTURE(errors[r]);
    CHECK(agreed[r] == 20);
  }
}
