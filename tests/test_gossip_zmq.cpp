// Push-sum over real ZeroMQ sockets on 127.0.0.1 (ports chosen by the OS), peers as threads:
// large vectors go out without copies and come back exact; a hostile sender is refused; a peer
// that never starts is named within the timeout and nobody hangs.
#include <doctest/doctest.h>

#include <memory>

#include "sgp/error.hpp"
#include "sgp/gossip/zmq_peer.hpp"
#include "sgp/transport/zmq_transport.hpp"
#include "support/gossip_peer_runner.hpp"

using namespace sgp;
using sgp::testing::Graph;

namespace {

// One transport per rank, bound at tcp://127.0.0.1:* and connected as the schedule says;
// ranks in `absent` get an endpoint nobody listens on.
std::vector<std::unique_ptr<transport::ZmqTransport>> open_all(const topology::Schedule& s,
                                                               std::set<int> absent = {}) {
  std::vector<std::unique_ptr<transport::ZmqTransport>> ts;
  std::vector<std::string> endpoints;
  for (int r = 0; r < s.num_peers(); ++r) {
    ts.push_back(std::make_unique<transport::ZmqTransport>(r, "tcp://127.0.0.1:*"));
    endpoints.push_back(ts.back()->endpoint());
  }
  for (int r : absent) ts[r].reset();  // its port is closed again
  for (int r = 0; r < s.num_peers(); ++r) {
    if (!ts[r]) continue;
    for (int dest : s.all_out_neighbors(r)) ts[r]->connect(dest, endpoints[dest]);
  }
  return ts;
}

std::vector<transport::Transport*> raw(
    const std::vector<std::unique_ptr<transport::ZmqTransport>>& ts) {
  std::vector<transport::Transport*> out;
  for (const auto& t : ts) out.push_back(t.get());
  return out;
}

}  // namespace

TEST_CASE("push-sum over ZeroMQ: 4 and 8 peers, sync and overlap, exact mean and mass") {
  constexpr std::size_t dim = 100003;  // 400 kB vectors in 11 chunks (the last one 3 floats)
  for (int n : {4, 8}) {
    for (auto mode : {gossip::Mode::sync, gossip::Mode::overlap}) {
      CAPTURE(n);
      CAPTURE(sgp::name_of(mode));
      const auto s = sgp::testing::make_schedule(Graph::exponential, n);
      gossip::PushSumConfig cfg;
      cfg.mode = mode;
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
  CHECK_THROWS_WITH_AS(gossip::open_zmq_transport(s, 0), doctest::Contains("endpoint"), InputError);
}
