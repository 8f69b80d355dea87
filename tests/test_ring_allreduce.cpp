// Ring allreduce (--algo allreduce) with N peers as threads over the in-process transport: every
// peer ends each round with exactly the average, the same bits on every peer, for sizes that
// divide neither by N nor by the chunk size; each peer sends 2 (N - 1) / N of the vector; a
// message out of sequence is refused and counted; a peer that never starts is named.
#include <doctest/doctest.h>

#include <cstring>
#include <thread>

#include "sgp/compute/cpu_backend.hpp"
#include "sgp/error.hpp"
#include "sgp/gossip/ring_allreduce.hpp"
#include "sgp/gossip/wire_format.hpp"
#include "sgp/transport/inproc_transport.hpp"
#include "support/staged_cpu_backend.hpp"

using namespace sgp;

namespace {

// Rank r's element i: the integer a_i plus a deviation whose sum over the ranks is zero, so the
// average is exactly a_i (all partial sums are small integers: exact in float32). Round k adds
// k * deviation again, as if each peer took its own step between rounds.
float target(std::size_t i) { return static_cast<float>(static_cast<int>(i % 101) - 50); }
float deviation(int rank, int n, std::size_t i) {
  return static_cast<float>((2 * rank - (n - 1)) * static_cast<int>(i % 7 + 1));
}

struct PeerOutcome {
  std::vector<std::vector<float>> after_round;
  gossip::PushSumMetrics metrics;
  std::string error;
};

std::vector<PeerOutcome> run_ring(int n, std::size_t dim, int rounds, std::uint64_t chunk,
                                  transport::InProcNetwork& net, int absent = -1,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(20),
                                  bool staged = false) {
  std::vector<PeerOutcome> out(n);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank) {
    if (rank == absent) continue;
    threads.emplace_back([&, rank] {
      try {
        // staged: a backend that says it is a GPU, so x goes through host staging.
        std::unique_ptr<compute::Backend> backend_owner;
        if (staged) {
          backend_owner = std::make_unique<testing::StagedCpuBackend>();
        } else {
          backend_owner = std::make_unique<compute::CpuBackend>(1);
        }
        compute::Backend& backend = *backend_owner;
        transport::InProcTransport transport(net, rank);
        std::vector<float> x(dim);
        for (std::size_t i = 0; i < dim; ++i) x[i] = target(i) + deviation(rank, n, i);
        gossip::PushSumConfig config;
        config.mode = gossip::Mode::allreduce;
        config.chunk_elements = chunk;
        config.timeout = timeout;
        gossip::RingAllReduce ring(backend, n, transport, x.data(), dim, config);
        for (int k = 0; k < rounds; ++k) {
          if (k > 0) {
            for (std::size_t i = 0; i < dim; ++i) x[i] += deviation(rank, n, i) * k;
          }
          const bool mixed = ring.step(k);  // outside CHECK: an IoError must reach `error`
          CHECK(mixed);
          out[rank].after_round.push_back(x);
          CHECK(ring.weight() == 1.0);
        }
        ring.finish();
        out[rank].metrics = ring.metrics();
      } catch (const std::exception& e) {
        out[rank].error = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

std::size_t segment_size(std::size_t dim, int n, int s) {
  return gossip::RingAllReduce::segment_begin(dim, n, s + 1) -
         gossip::RingAllReduce::segment_begin(dim, n, s);
}

}  // namespace

TEST_CASE("ring allreduce gives every peer exactly the average, bit for bit, round after round") {
  for (int n : {1, 2, 3, 5, 8}) {
    for (std::size_t dim : {std::size_t{1}, std::size_t{7}, std::size_t{1000003}}) {
      // The default chunking (1 MiB), and chunks of 3 elements for the small vectors (several
      // chunks per segment, the last one short).
      for (std::uint64_t chunk : {std::uint64_t{262144}, std::uint64_t{3}}) {
        if (chunk == 3 && dim > 7) continue;
        CAPTURE(n);
        CAPTURE(dim);
        CAPTURE(chunk);
        const int rounds = dim > 7 ? 2 : 3;
        transport::InProcNetwork net(n);
        const auto out = run_ring(n, dim, rounds, chunk, net);
        for (int rank = 0; rank < n; ++rank) {
          REQUIRE_MESSAGE(out[rank].error.empty(), out[rank].error);
          for (int k = 0; k < rounds; ++k) {
            const auto& x = out[rank].after_round.at(k);
            std::size_t wrong = 0;
            for (std::size_t i = 0; i < dim; ++i) wrong += x[i] != target(i);
            CHECK_MESSAGE(wrong == 0, "rank " << rank << " round " << k);
            // The same bits as rank 0's.
            CHECK(std::memcmp(x.data(), out[0].after_round.at(k).data(), dim * sizeof(float)) == 0);
          }
          const auto& m = out[rank].metrics;
          CHECK(m.rounds == rounds);
          CHECK(m.rejected_total() == 0);
          // Bandwidth optimal: every segment but (rank + 1)'s in reduce-scatter, every one but
          // (rank + 2)'s in all-gather.
          const std::size_t floats = n == 1 ? 0
                                            : 2 * dim - segment_size(dim, n, (rank + 1) % n) -
                                                  segment_size(dim, n, (rank + 2) % n);
          CHECK(m.bytes_sent - m.messages_sent * gossip::kHeaderBytes ==
                rounds * floats * sizeof(float));
          CHECK(m.bytes_received == out[(rank + n - 1) % n].metrics.bytes_sent);
        }
      }
    }
  }
}

TEST_CASE("the device path (x staged through host memory) gives the same exact averages") {
  for (std::size_t dim : {std::size_t{7}, std::size_t{1000003}}) {
    CAPTURE(dim);
    const int n = 5;
    transport::InProcNetwork net(n);
    const auto out = run_ring(n, dim, 2, 262144, net, -1, std::chrono::seconds(20), true);
    for (int rank = 0; rank < n; ++rank) {
      REQUIRE_MESSAGE(out[rank].error.empty(), out[rank].error);
      REQUIRE(out[rank].after_round.size() == 2);
      for (const auto& x : out[rank].after_round) {
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < dim; ++i) wrong += x[i] != target(i);
        CHECK(wrong == 0);
      }
    }
  }
}

TEST_CASE(
    "ring allreduce refuses messages out of sequence or from the wrong rank, and counts them") {
  const int n = 3;
  const std::size_t dim = 10;
  transport::InProcNetwork net(n + 1);  // rank 3: a rogue sender
  // Before the ring starts, rank 2's inbox gets: a chunk for round 5 from its genuine
  // predecessor (future), and the expected first chunk from a rank that is not its predecessor.
  auto send = [&](int from, std::int64_t round) {
    transport::InProcTransport rogue(net, from);
    std::vector<float> payload(segment_size(dim, n, 0), 1.0f);
    gossip::WireHeader h;
    h.dtype = gossip::kDtypeRingFloat32;
    h.sender = from;
    h.round = round;
    h.weight = 1.0;
    h.total = dim;
    h.offset = 0;
    h.count = payload.size();
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(payload.data()),
                                           payload.size() * sizeof(float));
    h.payload_hash = gossip::payload_hash(bytes);
    rogue.send(2, gossip::encode_header(h), bytes, [] {});
  };
  send(1, 5);
  send(3, 0);
  const auto out = run_ring(n, dim, 1, 262144, net);
  for (int rank = 0; rank < n; ++rank) {
    REQUIRE_MESSAGE(out[rank].error.empty(), out[rank].error);
    for (std::size_t i = 0; i < dim; ++i) CHECK(out[rank].after_round[0][i] == target(i));
  }
  const auto& m = out[2].metrics;
  CHECK(m.rejected_for(gossip::RejectCause::future_round) == 1);
  CHECK(m.rejected_for(gossip::RejectCause::unexpected_sender) == 1);
  CHECK(m.rejected_total() == 2);
}

TEST_CASE("a ring peer that never starts is named in an IoError within the timeout") {
  const int n = 3;
  transport::InProcNetwork net(n);
  const auto start = std::chrono::steady_clock::now();
  const auto out = run_ring(n, 10, 1, 262144, net, 1, std::chrono::milliseconds(300));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  // Rank 2 waits for rank 1, its predecessor.
  CHECK(out[2].error.find("no allreduce message from rank 1 for round 0") != std::string::npos);
  CHECK(!out[0].error.empty());
}
