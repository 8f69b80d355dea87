// Push-sum average consensus with N peers as threads over the in-process transport: every peer
// reaches the exact initial mean, total weight is conserved, hostile messages are refused and
// counted, and a peer that never starts is named in a clear IoError.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <set>
#include <thread>

#include "gossip_test_support.hpp"
#include "sgp/compute/cpu_backend.hpp"
#include "sgp/error.hpp"
#include "sgp/gossip/push_sum_engine.hpp"
#include "sgp/gossip/wire_format.hpp"
#include "sgp/transport/inproc_transport.hpp"

using namespace sgp;
using sgp::testing::Graph;

namespace {

struct PeerResult {
  std::vector<float> z;
  std::vector<double> w_after_round;
  double final_weight = 0;
  gossip::PushSumMetrics metrics;
  std::string error;
};

// Called on a peer's thread after each of its rounds (round = rounds completed).
using Hook = std::function<void(int rank, std::int64_t round)>;

std::vector<PeerResult> run_inproc(const topology::Schedule& s, transport::InProcNetwork& net,
                                   std::size_t dim, int rounds, gossip::PushSumConfig cfg,
                                   const std::set<int>& absent = {}, Hook hook = {}) {
  const int n = s.num_peers();
  std::vector<PeerResult> results(n);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank) {
    if (absent.contains(rank)) continue;
    threads.emplace_back([&, rank] {
      PeerResult& out = results[rank];
      try {
        compute::CpuBackend backend(1);
        auto x = sgp::testing::initial_vector(rank, n, dim);
        transport::InProcTransport t(net, rank);
        gossip::PushSumEngine engine(backend, s, t, x.data(), dim, cfg);
        for (int k = 0; k < rounds; ++k) {
          engine.step(k);
          out.w_after_round.push_back(engine.weight());
          if (hook) hook(rank, engine.round());
        }
        engine.finish();
        out.z.resize(dim);
        engine.debias(out.z.data());
        out.final_weight = engine.weight();
        out.metrics = engine.metrics();
      } catch (const std::exception& e) {
        out.error = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

double relative_error(const std::vector<float>& z, const std::vector<double>& mean) {
  double worst = 0, scale = 0;
  for (std::size_t d = 0; d < z.size(); ++d) {
    worst = std::max(worst, std::abs(z[d] - mean[d]));
    scale = std::max(scale, std::abs(mean[d]));
  }
  return worst / scale;
}

void check_consensus(const std::vector<PeerResult>& results, const topology::Schedule& s,
                     std::size_t dim, int rounds, double min_tolerance = 1e-6) {
  const int n = s.num_peers();
  const auto mean = sgp::testing::exact_mean(n, dim);
  const double tolerance = std::max(min_tolerance, 2 * sgp::testing::float32_floor(s, dim, rounds));
  double total_w = 0;
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r);
    REQUIRE(results[r].error == "");
    CHECK(relative_error(results[r].z, mean) <= tolerance);
    total_w += results[r].final_weight;
  }
  CHECK(std::abs(total_w - n) <= 1e-12);
}

const Graph kGraphs[] = {Graph::ring, Graph::exponential, Graph::complete};
const int kSizes[] = {1, 2, 3, 5, 8, 16};
constexpr std::size_t kDim = 33;

}  // namespace

TEST_CASE("sync push-sum reaches the exact mean and conserves weight every round") {
  for (Graph g : kGraphs) {
    for (int n : kSizes) {
      CAPTURE(sgp::testing::graph_name(g));
      CAPTURE(n);
      const auto s = sgp::testing::make_schedule(g, n);
      const int rounds = sgp::testing::reference_rounds(s, kDim, 1e-7) * 11 / 10 + 5;
      transport::InProcNetwork net(n);
      gossip::PushSumConfig cfg;
      cfg.timeout = std::chrono::milliseconds(20000);
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

TEST_CASE("overlap push-sum (tau 0, 1, 2) converges and conserves mass after finish") {
  for (int tau : {0, 1, 2}) {
    for (Graph g : kGraphs) {
      for (int n : {1, 3, 8, 16}) {
        CAPTURE(tau);
        CAPTURE(sgp::testing::graph_name(g));
        CAPTURE(n);
        const auto s = sgp::testing::make_schedule(g, n);
        // Stale mixing is slower: the rate with every message tau rounds late, plus a margin.
        const int rounds = sgp::testing::reference_rounds(s, kDim, 1e-7, tau) * 11 / 10 + 5;
        transport::InProcNetwork net(n);
        gossip::PushSumConfig cfg;
        cfg.mode = gossip::Mode::overlap;
        cfg.tau = tau;
        cfg.timeout = std::chrono::milliseconds(20000);
        auto results = run_inproc(s, net, kDim, rounds, cfg);
        // Late messages take other float32 rounding paths than sync mode: 32 ulps (4e-6).
        check_consensus(results, s, kDim, rounds, 4e-6);
      }
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
  h.count = dim;
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
    gossip::WireHeader h{99, 0, 1.0, 0.5, kDim, gossip::payload_hash(payload)};
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

TEST_CASE("a peer that never starts is named in an IoError within the timeout") {
  for (auto mode : {gossip::Mode::sync, gossip::Mode::overlap}) {
    CAPTURE(gossip::mode_name(mode));
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
