// Push-sum over real ZeroMQ sockets on 127.0.0.1 (ports chosen by the OS), peers as threads:
// large vectors go out without copies and come back exact; a hostile sender is refused; a peer
// that never starts is named within the timeout and nobody hangs.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <utility>

#include "sgp/compute/cpu_backend.hpp"
#include "sgp/error.hpp"
#include "sgp/gossip/async_push_sum.hpp"
#include "sgp/gossip/control_message.hpp"
#include "sgp/gossip/zmq_peer.hpp"
#include "sgp/topology/generator.hpp"
#include "sgp/transport/curve.hpp"
#include "sgp/transport/zmq_transport.hpp"
#include "support/gossip_peer_runner.hpp"
#include "support/temp_dir.hpp"

using namespace sgp;
using sgp::testing::Graph;

namespace {

const transport::ReceiveLimits kLimits{8 << 20, 1024};

// One transport per rank, bound at tcp://127.0.0.1:* and connected as the schedule says;
// ranks in `absent` get an endpoint nobody listens on.
std::vector<std::unique_ptr<transport::ZmqTransport>> open_all(const topology::Schedule& s,
                                                               std::set<int> absent = {}) {
  std::vector<std::unique_ptr<transport::ZmqTransport>> ts;
  std::vector<std::string> endpoints;
  for (int r = 0; r < s.num_peers(); ++r) {
    ts.push_back(std::make_unique<transport::ZmqTransport>(r, "tcp://127.0.0.1:*", kLimits));
    endpoints.push_back(ts.back()->endpoint());
  }
  for (int r : absent) ts[r].reset();  // its port is closed again
  for (int r = 0; r < s.num_peers(); ++r) {
    if (!ts[r]) continue;
    for (int dest : s.all_out_neighbors(r)) ts[r]->connect(dest, endpoints[dest]);
  }
  return ts;
}

// `s` with free loopback endpoints and a CURVE keypair per rank, the secret keys in `dir` as
// `sgp keygen` writes them.
topology::Schedule keyed(topology::Schedule s, const std::filesystem::path& dir) {
  s.set_endpoints(topology::free_local_endpoints(s.num_peers()));
  std::vector<std::string> keys;
  for (int r = 0; r < s.num_peers(); ++r) {
    const auto pair = transport::generate_curve_keypair();
    transport::write_curve_keypair(dir, fmt::format("peer-{}", r), pair);
    keys.push_back(pair.public_key);
  }
  s.set_public_keys(keys);
  return s;
}

std::vector<std::unique_ptr<transport::ZmqTransport>> open_keyed(const topology::Schedule& s,
                                                                 const std::filesystem::path& dir,
                                                                 const gossip::Chunking& chunking) {
  std::vector<std::unique_ptr<transport::ZmqTransport>> ts;
  for (int r = 0; r < s.num_peers(); ++r) {
    ts.push_back(gossip::open_zmq_transport(s, r, chunking, {dir, false}));
  }
  return ts;
}

// A well-formed push-sum message (valid hashes) claiming to come from `sender`.
void send_forged(
    transport::ZmqTransport& from, int dest, int sender, std::int64_t round,
    const topology::Schedule& s, const std::vector<float>& payload,
    transport::ReleaseFn released = [] {}) {
  gossip::WireHeader h;
  h.sender = sender;
  h.round = round;
  h.weight = 1e6;
  h.coefficient = s.push_weight(sender, dest, round);
  h.total = payload.size();
  h.count = payload.size();
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(payload.data()),
                                         payload.size() * sizeof(float));
  h.payload_hash = gossip::payload_hash(bytes);
  from.send(dest, gossip::encode_header(h), bytes, std::move(released));
}

std::vector<transport::Transport*> raw(
    const std::vector<std::unique_ptr<transport::ZmqTransport>>& ts) {
  std::vector<transport::Transport*> out;
  for (const auto& t : ts) out.push_back(t.get());
  return out;
}

// Four keyed peers on the one-peer exponential graph (keys in `dir`), 64-float vectors; run()
// checks that they reach the exact mean.
struct KeyedPeers {
  sgp::testing::TempDir dir;
  static constexpr std::size_t dim = 64;
  gossip::PushSumConfig cfg{.timeout = std::chrono::milliseconds(20000)};
  topology::Schedule s = keyed(sgp::testing::make_schedule(Graph::exponential, 4), dir.path());
  std::vector<std::unique_ptr<transport::ZmqTransport>> ts =
      open_keyed(s, dir.path(), gossip::Chunking(dim, cfg.chunk_elements));
  int rounds = sgp::testing::reference_rounds(s, dim, 1e-7) * 11 / 10 + 5;

  std::vector<sgp::testing::PeerResult> run() {
    auto results = sgp::testing::run_peers(s, raw(ts), dim, rounds, cfg);
    sgp::testing::check_consensus(results, s, dim, rounds);
    return results;
  }
};

}  // namespace

TEST_CASE("push-sum over ZeroMQ: 4 and 8 peers, sync and overlap, exact mean and mass") {
  constexpr std::size_t dim = 100003;  // 400 kB vectors in 11 chunks (the last one 3 floats)
  for (int n : {4, 8}) {
    for (const auto& variant : {std::pair{gossip::Mode::sync, true},
                                {gossip::Mode::overlap, true},
                                {gossip::Mode::overlap, false}}) {
      const gossip::Mode mode = variant.first;
      const bool comm_thread = variant.second;
      CAPTURE(n);
      CAPTURE(sgp::name_of(mode));
      CAPTURE(comm_thread);
      const auto s = sgp::testing::make_schedule(Graph::exponential, n);
      gossip::PushSumConfig cfg;
      cfg.mode = mode;
      cfg.comm_thread = comm_thread;
      cfg.timeout = std::chrono::milliseconds(20000);
      cfg.chunk_elements = 10000;
      const int delay = mode == gossip::Mode::overlap ? cfg.tau : 0;
      const int rounds = sgp::testing::reference_rounds(s, 64, 1e-7, delay) * 11 / 10 + 5;
      auto ts = open_all(s);
      auto results = sgp::testing::run_peers(s, raw(ts), dim, rounds, cfg);
      sgp::testing::check_consensus(results, s, dim, rounds,
                                    mode == gossip::Mode::overlap ? 4e-6 : 1e-6);
      for (const auto& r : results) {
        CHECK(r.metrics.rejected_total() == 0);
        const gossip::Chunking chunks(dim, cfg.chunk_elements);
        CHECK(r.metrics.messages_sent == rounds * chunks.chunks());
        CHECK(r.metrics.bytes_sent ==
              rounds * (chunks.chunks() * gossip::kHeaderBytes + dim * sizeof(float)));
      }
    }
  }
}

TEST_CASE("push-sum over ZeroMQ: garbage from a rogue socket is counted, consensus completes") {
  const auto s = sgp::testing::make_schedule(Graph::exponential, 4);
  auto ts = open_all(s);
  // Sent on rank 0's own link to rank 1 (0 -> 1 in round 0), so ZeroMQ's per-link ordering puts
  // them before rank 0's genuine round-0 message: rank 1 cannot finish round 0 without reading
  // them first.
  std::vector<std::byte> junk(gossip::kHeaderBytes, std::byte{0x5a});
  std::vector<std::byte> payload(64 * sizeof(float), std::byte{1});
  ts[0]->send(1, junk, payload, [] {});                      // bad magic
  ts[0]->send(1, std::span(junk).first(8), payload, [] {});  // truncated header
  gossip::PushSumConfig cfg;
  cfg.timeout = std::chrono::milliseconds(20000);
  const int rounds = sgp::testing::reference_rounds(s, 64, 1e-7) * 11 / 10 + 5;
  auto results = sgp::testing::run_peers(s, raw(ts), 64, rounds, cfg);
  sgp::testing::check_consensus(results, s, 64, rounds);
  CHECK(results[1].metrics.rejected_for(gossip::RejectCause::bad_magic) == 1);
  CHECK(results[1].metrics.rejected_for(gossip::RejectCause::header_size) == 1);
}

TEST_CASE("push-sum over ZeroMQ: a peer that never starts is named, nobody hangs") {
  for (auto mode : {gossip::Mode::sync, gossip::Mode::overlap}) {
    CAPTURE(sgp::name_of(mode));
    const auto s = sgp::testing::make_schedule(Graph::complete, 3);
    auto ts = open_all(s, {2});
    gossip::PushSumConfig cfg;
    cfg.mode = mode;
    cfg.timeout = std::chrono::milliseconds(400);
    auto results = sgp::testing::run_peers(s, raw(ts), 1000, 10, cfg);
    for (int r : {0, 1}) {
      INFO(results[r].error);
      CHECK(results[r].error.find("rank 2") != std::string::npos);
      CHECK(results[r].error.find("round 0") != std::string::npos);
    }
  }
}

TEST_CASE("open_zmq_transport needs endpoints in the topology") {
  const auto s = sgp::testing::make_schedule(Graph::ring, 2);
  CHECK_THROWS_WITH_AS(gossip::open_zmq_transport(s, 0, gossip::Chunking(10, 0), {}),
                       doctest::Contains("endpoint"), InputError);
}

TEST_CASE("keyed topology: forged messages from clients without an admitted key never count") {
  KeyedPeers peers;
  const auto& s = peers.s;
  // Rank 1's in-neighbour in round 0 is rank 0. Forgers: plain TCP, and CURVE with a key rank 1
  // does not know; each sends well-formed messages for the current and future rounds, with NaN
  // payloads and a huge weight, before the genuine peers even start.
  const std::vector<float> poison(peers.dim, std::nanf(""));
  transport::ZmqTransport plain(7, "tcp://127.0.0.1:*", kLimits);
  transport::ZmqOptions stranger;
  stranger.curve =
      transport::ZmqCurve{transport::generate_curve_keypair(), {}, {{1, s.public_key(1)}}};
  transport::ZmqTransport unknown(8, "tcp://127.0.0.1:*", kLimits, stranger);
  for (auto* forger : {&plain, &unknown}) {
    forger->connect(1, s.endpoint(1));
    for (std::int64_t round = 0; round < 6; round += 2)
      send_forged(*forger, 1, 0, round, s, poison);
  }
  const auto results = peers.run();
  for (const auto& r : results) {
    CHECK(r.metrics.rejected_total() == 0);  // not even seen: refused during the handshake
    CHECK(r.metrics.messages_received == static_cast<std::uint64_t>(peers.rounds));
  }
}

TEST_CASE("keyed topology: a keyed peer writing another rank into `sender` is sender_mismatch") {
  KeyedPeers peers;
  const auto& s = peers.s;
  // Rank 3 (an in-neighbour of rank 1: 3 + 2 = 1 mod 4) poses as rank 0 with its own key.
  transport::ZmqOptions as_three;
  as_three.curve = transport::ZmqCurve{
      transport::read_curve_keypair(peers.dir.path(), "peer-3"), {}, {{1, s.public_key(1)}}};
  transport::ZmqTransport impostor(3, "tcp://127.0.0.1:*", kLimits, as_three);
  impostor.connect(1, s.endpoint(1));
  const std::vector<float> poison(peers.dim, 1e30f);
  std::atomic<int> written{0};
  for (std::int64_t round = 0; round < 3; ++round)
    send_forged(impostor, 1, 0, round * 2, s, poison, [&written] { ++written; });
  // All three on the wire before the peers start: one still in the impostor's queue after
  // rank 1 finished was never counted (1 run in 6 saw 2 rejects).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (written < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  REQUIRE(written == 3);
  const auto results = peers.run();
  CHECK(results[1].metrics.rejected_for(gossip::RejectCause::sender_mismatch) == 3);
  CHECK(results[1].metrics.rejected_total() == 3);
}

// The attack of issue 32: with rank 2's valid key, an "exclude" claiming rank 1 (which observes
// rank 0) made rank 0 stop with exit 3. Now CURVE's word on the sender counts for notices too.
TEST_CASE("keyed topology: an asgp notice forged with a valid key is refused and counted") {
  sgp::testing::TempDir dir;
  const auto s = keyed(sgp::testing::make_schedule(Graph::exponential, 4), dir.path());
  constexpr std::size_t dim = 16;
  gossip::PushSumConfig cfg;
  cfg.mode = gossip::Mode::async;
  cfg.timeout = std::chrono::milliseconds(20000);
  auto t0 = gossip::open_zmq_transport(s, 0, gossip::Chunking(dim, 0), {dir.path(), false}, {},
                                       gossip::Mode::async);
  compute::CpuBackend backend(1);
  std::vector<float> x(dim, 1.0f);
  gossip::AsyncPushSum engine(backend, s, *t0, x.data(), dim, cfg);
  transport::ZmqOptions as_two;
  as_two.curve = transport::ZmqCurve{
      transport::read_curve_keypair(dir.path(), "peer-2"), {}, {{0, s.public_key(0)}}};
  transport::ZmqTransport key_holder(2, "tcp://127.0.0.1:*", kLimits, as_two);
  key_holder.connect(0, s.endpoint(0));
  // In rank 1's name, then in its own about rank 3, which it does not observe (3 pushes to 0, 1).
  for (const gossip::ControlMessage& notice :
       {gossip::ControlMessage{gossip::ControlKind::exclude, 1, 0, 0, 5},
        gossip::ControlMessage{gossip::ControlKind::exclude, 2, 3, 0, 5}}) {
    key_holder.send(0, gossip::encode_control(notice), {}, [] {});
  }
  auto refused = [&engine] {
    const auto m = engine.metrics();
    return m.rejected_for(gossip::RejectCause::sender_mismatch) +
           m.rejected_for(gossip::RejectCause::not_entitled);
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (refused() < 2 && std::chrono::steady_clock::now() < deadline)
    engine.idle(std::chrono::milliseconds(10));
  CHECK(engine.metrics().rejected_for(gossip::RejectCause::sender_mismatch) == 1);
  CHECK(engine.metrics().rejected_for(gossip::RejectCause::not_entitled) == 1);
  for (int r = 0; r < 4; ++r) CHECK(engine.membership().live(r));
}

TEST_CASE("security flags: keys need --keys, plain non-loopback endpoints need --insecure") {
  sgp::testing::TempDir dir;
  const gossip::Chunking chunking(16, 0);
  auto s = sgp::testing::make_schedule(Graph::ring, 2);
  s.set_endpoints({"tcp://192.0.2.1:5600", "tcp://192.0.2.2:5600"});
  CHECK_THROWS_WITH_AS(gossip::open_zmq_transport(s, 0, chunking, {}),
                       doctest::Contains("pass --insecure"), InputError);
  CHECK_THROWS_WITH_AS(gossip::open_zmq_transport(s, 0, chunking, {dir.path(), false}),
                       doctest::Contains("no public_key attributes"), InputError);
  const auto k = keyed(sgp::testing::make_schedule(Graph::ring, 2), dir.path());
  CHECK_THROWS_WITH_AS(gossip::open_zmq_transport(k, 0, chunking, {}),
                       doctest::Contains("give --keys DIR"), InputError);
  auto other = k;
  other.set_public_keys({k.public_key(1), k.public_key(0)});
  CHECK_THROWS_WITH_AS(gossip::open_zmq_transport(other, 0, chunking, {dir.path(), false}),
                       doctest::Contains("does not belong to node 0"), InputError);
}
