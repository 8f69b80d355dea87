// Push-sum average consensus with N peers as threads over the in-process transport: every peer
// reaches the exact initial mean, total weight is conserved, hostile messages are refused and
// counted, and a peer that never starts is named in a clear IoError.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <thread>
#include <utility>

#include "sgp/compute/cpu_backend.hpp"
#include "sgp/error.hpp"
#include "sgp/gossip/push_sum_arithmetic.hpp"
#include "sgp/gossip/push_sum_engine.hpp"
#include "sgp/gossip/wire_format.hpp"
#include "sgp/topology/analysis.hpp"
#include "sgp/topology/generator.hpp"
#include "sgp/transport/inproc_transport.hpp"
#include "support/gossip_peer_runner.hpp"
#include "support/staged_cpu_backend.hpp"

using namespace sgp;
using sgp::testing::Graph;

namespace {

using sgp::testing::check_consensus;
using sgp::testing::Hook;
using sgp::testing::run_inproc;

const int kSizes[] = {1, 2, 3, 5, 8, 16};
constexpr std::size_t kDim = 33;

struct Case {
  std::string name;
  topology::Schedule schedule;
};

// Every generator kind for every N in kSizes it accepts (a hypercube needs a power of two, a
// torus a composite N, every kind N >= 2), plus the single peer.
std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (int n : kSizes) {
    if (n == 1) {
      cases.push_back({"single peer", sgp::testing::make_schedule(Graph::ring, 1)});
      continue;
    }
    for (auto kind : topology::all_topology_kinds()) {
      topology::GeneratorOptions options;
      options.num_peers = n;
      options.seed = 7;
      try {
        cases.push_back({fmt::format("{} N={}", topology::topology_kind_name(kind), n),
                         topology::generate_topology(kind, options)});
      } catch (const InputError&) {
        // This kind does not exist for this N.
      }
    }
  }
  return cases;
}

// Rounds for a relative error of 1e-6: what the topology's consensus rate predicts for 1e-7 (a
// factor 10 of margin), plus 10% and one period.
int predicted_rounds(const topology::Schedule& s) {
  const auto report = topology::analyze_topology(s, kDim, 1e-7);
  REQUIRE(report.predicted_rounds.has_value());
  return static_cast<int>(*report.predicted_rounds * 11 / 10) + s.period() + 1;
}

}  // namespace

TEST_CASE("sync push-sum reaches the exact mean and conserves weight every round") {
  for (const Case& c : all_cases()) {
    const std::string& name = c.name;
    const topology::Schedule& s = c.schedule;
    // One message per vector, and 7 chunks of at most 5 elements.
    for (std::uint64_t chunk : {std::uint64_t{0}, std::uint64_t{5}}) {
      CAPTURE(name);
      CAPTURE(chunk);
      const int n = s.num_peers();
      const int rounds = predicted_rounds(s);
      transport::InProcNetwork net(n);
      gossip::PushSumConfig cfg;
      cfg.timeout = std::chrono::milliseconds(20000);
      cfg.chunk_elements = chunk;
      auto results = run_inproc(s, net, kDim, rounds, cfg);
      check_consensus(results, s, kDim, rounds);
      for (int k = 0; k < rounds; ++k) {
        double sum = 0;
        for (const auto& r : results) sum += r.w_after_round.at(k);
        if (std::abs(sum - n) > 1e-12) {
          FAIL("sum of weights after round " << k << " is " << sum);
        }
      }
      for (const auto& r : results) CHECK(r.metrics.rejected_total() == 0);
    }
  }
}

TEST_CASE("keeping and adding shares in one pass equals a copy, a scale and an axpy each") {
  compute::CpuBackend backend;
  const std::size_t n = 5001;  // more than two of the kernel's blocks, and an odd tail
  auto values = [n](float phase) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = std::sin(static_cast<float>(i) + phase) * 3.7f;
    return v;
  };
  const std::vector<float> x = values(0.0f), a = values(1.0f), b = values(2.0f);
  const std::vector<gossip::Share> all = {{0.3, a.data()}, {1.0 / 7.0, b.data()}};
  const double self_weight = 1.0 / 3.0;  // not a power of two: the products are rounded
  for (std::size_t k = 0; k <= all.size(); ++k) {
    CAPTURE(k);
    const std::span<const gossip::Share> shares(all.data(), k);
    std::vector<float> separate = x;
    gossip::keep_share(backend, separate.data(), n, self_weight);
    for (const auto& s : shares)
      gossip::add_share(backend, s.coefficient, s.sender_x, separate.data(), n);
    std::vector<float> fused = x, snapshot(n);
    gossip::keep_and_add_shares(fused.data(), n, self_weight, shares, snapshot.data());
    CHECK(snapshot == x);
    CHECK(fused == separate);  // bit for bit
    CHECK(fused != x);
    std::vector<float> unsnapshotted = x;
    gossip::keep_and_add_shares(unsnapshotted.data(), n, self_weight, shares);
    CHECK(unsnapshotted == separate);
  }
}

TEST_CASE("overlap push-sum (tau 0, 1, 2) converges and conserves mass after finish") {
  for (int tau : {0, 1, 2}) {
    for (const Case& c : all_cases()) {
      const std::string& name = c.name;
      const topology::Schedule& s = c.schedule;
      // With its communication thread, and inline (the caller's thread does its work).
      for (bool comm_thread : {true, false}) {
        CAPTURE(comm_thread);
        CAPTURE(tau);
        CAPTURE(name);
        const int n = s.num_peers();
        // Stale mixing is slower: the rate with every message tau rounds late, plus a margin.
        const int rounds = sgp::testing::reference_rounds(s, kDim, 1e-7, tau) * 11 / 10 + 5;
        transport::InProcNetwork net(n);
        gossip::PushSumConfig cfg;
        cfg.mode = gossip::Mode::overlap;
        cfg.tau = tau;
        cfg.comm_thread = comm_thread;
        cfg.chunk_elements = 5;  // 7 chunks: whole messages must be applied, never a part
        cfg.timeout = std::chrono::milliseconds(20000);
        auto results = run_inproc(s, net, kDim, rounds, cfg);
        // Late messages take other float32 rounding paths than sync mode: 32 ulps (4e-6).
        // Inline, a message is applied only at the next step, always the latest allowed: the
        // peers agree, but their common value drifts by up to 64 ulps (4.5e-6 measured on the
        // 16-peer torus with tau 2).
        check_consensus(results, s, kDim, rounds, comm_thread ? 4e-6 : 8e-6);
      }
    }
  }
}

TEST_CASE("the device path (host staging, uploads into device scratch) mixes the same way") {
  for (const auto& variant : {std::pair{gossip::Mode::sync, true},
                              {gossip::Mode::overlap, true},
                              {gossip::Mode::overlap, false}}) {
    const gossip::Mode mode = variant.first;
    const bool comm_thread = variant.second;
    for (int n : {3, 8}) {
      CAPTURE(sgp::name_of(mode));
      CAPTURE(comm_thread);
      CAPTURE(n);
      topology::GeneratorOptions options;
      options.num_peers = n;
      const auto s =
          topology::generate_topology(topology::TopologyKind::kOnePeerExponential, options);
      const int rounds = sgp::testing::reference_rounds(s, kDim, 1e-7, 1) * 11 / 10 + 5;
      transport::InProcNetwork net(n);
      gossip::PushSumConfig cfg;
      cfg.mode = mode;
      cfg.comm_thread = comm_thread;
      cfg.chunk_elements = 5;
      cfg.timeout = std::chrono::milliseconds(20000);
      auto results = run_inproc(s, net, kDim, rounds, cfg, {}, {},
                                [] { return std::make_unique<sgp::testing::StagedCpuBackend>(); });
      check_consensus(results, s, kDim, rounds, mode == gossip::Mode::overlap ? 4e-6 : 1e-6);
    }
  }
}

TEST_CASE("gossip every H iterations mixes once per H steps") {
  const auto s = sgp::testing::make_schedule(Graph::exponential, 4);
  transport::InProcNetwork net(4);
  gossip::PushSumConfig cfg;
  cfg.gossip_every = 3;
  const int rounds = sgp::testing::reference_rounds(s, kDim, 1e-7) + 2;
  auto results = run_inproc(s, net, kDim, rounds * 3, cfg);
  check_consensus(results, s, kDim, rounds);
  for (const auto& r : results) CHECK(r.metrics.rounds == rounds);
}

namespace {

// A message exactly as rank `sender` sends its initial vector in `round` to `dest`.
struct Forged {
  std::array<std::byte, gossip::kHeaderBytes> header;
  std::vector<float> payload;
};

Forged forge(const topology::Schedule& s, int sender, int dest, std::int64_t round,
             std::size_t dim) {
  Forged f;
  f.payload = sgp::testing::initial_vector(sender, s.num_peers(), dim);
  gossip::WireHeader h;
  h.sender = sender;
  h.round = round;
  h.weight = 1.0;
  h.coefficient = s.push_weight(sender, dest, round);
  h.total = dim;
  h.count = dim;  // one chunk: kDim is far below the chunk size
  h.payload_hash = gossip::payload_hash(std::as_bytes(std::span(f.payload)));
  f.header = gossip::encode_header(h);
  return f;
}

void send_raw(transport::Transport& t, int dest, std::span<const std::byte> header,
              std::span<const std::byte> payload) {
  t.send(dest, header, payload, [] {});
}

}  // namespace

TEST_CASE("hostile messages are rejected, counted per cause, and consensus still completes") {
  const int n = 5;
  const auto s = sgp::testing::make_schedule(Graph::ring, n);  // rank 0 hears only rank 4
  const int rounds = sgp::testing::reference_rounds(s, kDim, 1e-7) * 11 / 10 + 5;
  transport::InProcNetwork net(n + 1);
  transport::InProcTransport rogue(net, n);

  // Waiting in rank 0's inbox before it starts.
  const auto good = forge(s, 4, 0, 0, kDim);
  const auto payload = std::as_bytes(std::span(good.payload));
  send_raw(rogue, 0, std::span(good.header).first(30), payload);  // truncated header
  {
    auto big = good.payload;
    big.push_back(1.0f);
    send_raw(rogue, 0, good.header, std::as_bytes(std::span(big)));  // oversized payload
  }
  {
    auto h = good.header;
    h[0] = std::byte{0x00};
    send_raw(rogue, 0, h, payload);  // wrong magic
  }
  {
    auto p = good.payload;
    p[3] += 1.0f;
    send_raw(rogue, 0, good.header, std::as_bytes(std::span(p)));  // payload checksum
  }
  {
    gossip::WireHeader h = gossip::WireHeader{};
    h.sender = 99;
    h.weight = 1.0;
    h.coefficient = 0.5;
    h.total = h.count = kDim;
    h.payload_hash = gossip::payload_hash(payload);
    send_raw(rogue, 0, gossip::encode_header(h), payload);  // unknown rank
    h.sender = 2;                                           // a real rank that never pushes to 0
    send_raw(rogue, 0, gossip::encode_header(h), payload);
  }
  {
    std::array<std::byte, 1> one{};
    send_raw(rogue, 0, one, {});  // a lone frame, no payload
  }
  // A replay of rank 4's genuine round-0 message, sent once rank 0 has closed round 3.
  auto hook = [&](int rank, std::int64_t round) {
    if (rank == 0 && round == 3) send_raw(rogue, 0, good.header, payload);
  };
  gossip::PushSumConfig cfg;
  cfg.timeout = std::chrono::milliseconds(20000);
  auto results = run_inproc(s, net, kDim, rounds, cfg, {}, hook);
  check_consensus(results, s, kDim, rounds);
  const auto& m = results[0].metrics;
  using gossip::RejectCause;
  CHECK(m.rejected_for(RejectCause::header_size) == 2);  // truncated + the lone frame's header
  CHECK(m.rejected_for(RejectCause::bad_size) == 1);
  CHECK(m.rejected_for(RejectCause::bad_magic) == 1);
  CHECK(m.rejected_for(RejectCause::payload_checksum) == 1);
  CHECK(m.rejected_for(RejectCause::unknown_sender) == 1);
  CHECK(m.rejected_for(RejectCause::unexpected_sender) == 1);
  CHECK(m.rejected_for(RejectCause::duplicate_round) == 1);
  CHECK(m.rejected_total() == 8);
  CHECK(m.messages_received == static_cast<std::uint64_t>(rounds));
  for (int r = 1; r < n; ++r) CHECK(results[r].metrics.rejected_total() == 0);
}

TEST_CASE("stale, future and replayed rounds are each rejected with their cause counted") {
  // Rank 0 of a ring hears only rank 4. Each forged message below is one rank 4 could really have
  // sent (right coefficient and checksums); only its round is wrong. Were any of them applied,
  // rank 0 would count one message too many and total mass would no longer be N.
  const int n = 5;
  const auto s = sgp::testing::make_schedule(Graph::ring, n);
  const int rounds = std::max(100, sgp::testing::reference_rounds(s, kDim, 1e-7) * 11 / 10 + 5);
  transport::InProcNetwork net(n + 1);
  transport::InProcTransport rogue(net, n);
  gossip::PushSumConfig cfg;
  cfg.timeout = std::chrono::milliseconds(20000);
  cfg.max_rounds_ahead = 8;
  auto send = [&](std::int64_t round) {
    const auto f = forge(s, 4, 0, round, kDim);
    send_raw(rogue, 0, f.header, std::as_bytes(std::span(f.payload)));
  };
  auto hook = [&](int rank, std::int64_t round) {
    if (rank != 0) return;
    if (round == 3) send(1);   // replay of a recent round: rank 4 already sent round 1
    if (round == 4) send(20);  // 16 rounds ahead, max_rounds_ahead 8: future
    if (round == 90) send(2);  // a replay older than the rounds remembered: stale
  };
  auto results = run_inproc(s, net, kDim, rounds, cfg, {}, hook);
  check_consensus(results, s, kDim, rounds);
  const auto& m = results[0].metrics;
  using gossip::RejectCause;
  CHECK(m.rejected_for(RejectCause::duplicate_round) == 1);
  CHECK(m.rejected_for(RejectCause::future_round) == 1);
  CHECK(m.rejected_for(RejectCause::stale_round) == 1);
  CHECK(m.rejected_total() == 3);
  CHECK(m.messages_received == static_cast<std::uint64_t>(rounds));
}

TEST_CASE("a peer that never starts is named in an IoError within the timeout") {
  for (auto mode : {gossip::Mode::sync, gossip::Mode::overlap}) {
    CAPTURE(sgp::name_of(mode));
    const auto s = sgp::testing::make_schedule(Graph::complete, 3);
    transport::InProcNetwork net(3);
    gossip::PushSumConfig cfg;
    cfg.mode = mode;
    cfg.timeout = std::chrono::milliseconds(300);
    auto results = run_inproc(s, net, kDim, 10, cfg, {2});
    for (int r : {0, 1}) {
      INFO(results[r].error);
      CHECK(results[r].error.find("no message from rank 2 for gossip round") != std::string::npos);
    }
  }
}

TEST_CASE("NaN payloads and weight 1e300 are never applied; the time-out names what was rejected") {
  const int n = 3;
  const auto s = sgp::testing::make_schedule(Graph::ring, n);  // rank 0 hears only rank 2
  transport::InProcNetwork net(n + 1);
  transport::InProcTransport rogue(net, n);
  // Rank 2 never starts; in its place, well-formed messages (valid hashes and coefficient) with
  // NaN and infinite values, and one with weight 1e300, all for round 0.
  auto nan = forge(s, 2, 0, 0, kDim);
  nan.payload[5] = std::nanf("");
  auto inf = forge(s, 2, 0, 0, kDim);
  inf.payload[0] = -std::numeric_limits<float>::infinity();
  for (auto* f : {&nan, &inf}) {
    auto h = gossip::parse_header(f->header);
    REQUIRE(h.has_value());
    h->payload_hash = gossip::payload_hash(std::as_bytes(std::span(f->payload)));
    f->header = gossip::encode_header(*h);
    send_raw(rogue, 0, f->header, std::as_bytes(std::span(f->payload)));
  }
  auto heavy = forge(s, 2, 0, 0, kDim);
  auto h = gossip::parse_header(heavy.header);
  h->weight = 1e300;
  send_raw(rogue, 0, gossip::encode_header(*h), std::as_bytes(std::span(heavy.payload)));

  gossip::PushSumConfig cfg;
  cfg.timeout = std::chrono::milliseconds(500);
  auto results = run_inproc(s, net, kDim, 5, cfg, {2});
  const auto& m = results[0].metrics;
  CHECK(m.rejected_for(gossip::RejectCause::non_finite) == 2);
  CHECK(m.rejected_for(gossip::RejectCause::bad_weight) == 1);
  CHECK(m.messages_received == 0);
  INFO(results[0].error);
  CHECK(results[0].error.find("no message from rank 2 for gossip round 0") != std::string::npos);
  CHECK(results[0].error.find("messages rejected from rank 2: 1 bad_weight, 2 non_finite (latest "
                              "for round 0)") != std::string::npos);
  CHECK(results[0].error.find("lr") == std::string::npos);
}

TEST_CASE("messages for rounds beyond what the topology allows, or beyond the held-bytes cap") {
  gossip::PushSumConfig cfg;
  cfg.timeout = std::chrono::milliseconds(300);
  SUBCASE("look-ahead: 2 peers in sync mode, a neighbour is at most 1 round ahead (+1 margin)") {
    const auto s = sgp::testing::make_schedule(Graph::ring, 2);
    CHECK(gossip::rounds_ahead_bound(s, cfg) == 2);
    transport::InProcNetwork net(3);
    transport::InProcTransport rogue(net, 2);
    for (int round = 1; round <= 5; ++round) {
      const auto f = forge(s, 1, 0, round, kDim);
      send_raw(rogue, 0, f.header, std::as_bytes(std::span(f.payload)));
    }
    auto results = run_inproc(s, net, kDim, 3, cfg, {1});
    CHECK(results[0].metrics.rejected_for(gossip::RejectCause::future_round) == 3);
    INFO(results[0].error);
    CHECK(results[0].error.find("3 future_round (latest for round 5)") != std::string::npos);
  }
  SUBCASE("held bytes: at most (tau + 2) rounds of messages when the cap is below that") {
    const auto s = sgp::testing::make_schedule(Graph::ring, 5);  // rank 0 hears rank 4
    cfg.max_held_bytes = 1;
    transport::InProcNetwork net(6);
    transport::InProcTransport rogue(net, 5);
    for (int round = 1; round <= 4; ++round) {
      const auto f = forge(s, 4, 0, round, kDim);
      send_raw(rogue, 0, f.header, std::as_bytes(std::span(f.payload)));
    }
    auto results = run_inproc(s, net, kDim, 3, cfg, {1, 2, 3, 4});
    CHECK(results[0].metrics.rejected_for(gossip::RejectCause::future_round) == 2);
  }
  SUBCASE("overlap mode: the look-ahead grows with tau and the period") {
    cfg.mode = gossip::Mode::overlap;
    cfg.tau = 3;
    CHECK(gossip::rounds_ahead_bound(sgp::testing::make_schedule(Graph::ring, 8), cfg) ==
          7 * 4 + 1);
  }
}

TEST_CASE("tau is bounded so that x cannot underflow while in-neighbours are late") {
  const auto s = sgp::testing::make_schedule(Graph::complete, 16);  // every p_ii = 1/16
  gossip::PushSumConfig cfg;
  cfg.mode = gossip::Mode::overlap;
  cfg.tau = 24;  // 25 rounds of 1/16: 2^-100
  CHECK_NOTHROW(gossip::check_tau(s, 0, cfg));
  cfg.tau = 25;
  CHECK_THROWS_WITH_AS(gossip::check_tau(s, 0, cfg),
                       doctest::Contains("--tau 25: rank 0 keeps a share of 0.0625 of its x per "
                                         "round in this topology"),
                       InputError);
  CHECK_THROWS_WITH_AS(gossip::check_tau(s, 0, cfg), doctest::Contains("use --tau <= 24"),
                       InputError);
  cfg.mode = gossip::Mode::sync;  // sync mode never runs ahead of its in-neighbours
  CHECK_NOTHROW(gossip::check_tau(s, 0, cfg));
}
