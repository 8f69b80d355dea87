// --compress topk:R | sign (CompressedPushSum, wire dtype 7) over the in-process transport:
// known answers. Sum x and sum w are conserved in sync and overlap mode, and in sync mode every
// peer's z reaches the exact mean of the seeded vectors; a hostile in-neighbour's malformed
// payloads are refused (bad_payload, counted) and never applied, and the genuine message after them
// is.
#include <doctest/doctest.h>

#include <cmath>
#include <thread>

#include "sgp/compress/compressor.hpp"
#include "sgp/compute/cpu_backend.hpp"
#include "sgp/gossip/compressed_push_sum.hpp"
#include "sgp/gossip/mixer.hpp"
#include "sgp/gossip/wire_format.hpp"
#include "sgp/transport/inproc_transport.hpp"
#include "support/gossip_peer_runner.hpp"

using namespace sgp;

TEST_CASE("compressed push-sum (topk, sign) conserves sum x, sum w; sync reaches the exact mean") {
  constexpr std::size_t kDim = 16;
  struct Case {
    const char* compressor;
    double gamma;
    int rounds;
  };
  // Rounds: about twice what `sgp simulate` (double) needs for 1e-12 on these graphs.
  for (auto c : {Case{"topk:0.25", 0.25, 400}, Case{"sign", 0.05, 1200}}) {
    for (auto mode : {gossip::Mode::sync, gossip::Mode::overlap}) {
      for (const auto& variant :
           {std::pair{testing::Graph::ring, 4}, std::pair{testing::Graph::exponential, 8}}) {
        const testing::Graph graph = variant.first;
        const int n = variant.second;
        CAPTURE(c.compressor);
        CAPTURE(name_of(mode));
        CAPTURE(testing::graph_name(graph));
        const auto s = testing::make_schedule(graph, n);
        gossip::PushSumConfig cfg;
        cfg.mode = mode;
        cfg.compressor = compress::parse_compressor(c.compressor, "--compress");
        cfg.consensus_step = c.gamma;
        cfg.timeout = std::chrono::seconds(20);
        transport::InProcNetwork net(n);
        const auto results = testing::run_inproc(s, net, kDim, c.rounds, cfg);
        const auto mean = testing::exact_mean(n, kDim);
        double weights = 0, drift = 0, error = 0;
        std::uint64_t rejected = 0, bytes = 0;
        for (const auto& r : results) {
          REQUIRE_MESSAGE(r.error.empty(), r.error);
          weights += r.final_weight;
          rejected += r.metrics.rejected_total();
          bytes += r.metrics.bytes_sent;
          error = std::max(error, testing::relative_error(r.z, mean));
        }
        CHECK(rejected == 0);
        CHECK(weights == doctest::Approx(n).epsilon(1e-12));
        for (std::size_t d = 0; d < kDim; ++d) {
          double sum = 0;
          for (const auto& r : results) sum += r.x[d];
          drift = std::max(drift, std::abs(sum - n * mean[d]) / std::abs(n * mean[d]));
        }
        // float32 rounding of the mixing additions (measured: at most 1.4e-6 after 1200 rounds)
        CHECK(drift <= 5e-6);
        // The exact mean to float32's floor in sync mode (measured: at most 2.8e-6, sign on the
        // ring). Overlap mode conserves the sums but stalls at a floor (docs/compression.md:
        // late messages move w, and the copies chase x's scale), so only the sums are checked.
        if (mode == gossip::Mode::sync) CHECK(error <= 5e-6);
        MESSAGE(c.compressor << " " << name_of(mode) << " " << testing::graph_name(graph)
                             << ": relative error " << error << ", drift " << drift << ", " << bytes
                             << " bytes sent");
      }
    }
  }
}

namespace {

// A message of dtype 7 from `sender` for round 0, as an honest peer would frame it.
void send_compressed(transport::InProcTransport& from, int to, std::vector<std::uint8_t> payload,
                     std::size_t dim) {
  gossip::WireHeader h;
  h.dtype = gossip::kDtypeCompressed;
  h.sender = from.rank();
  h.weight = 1.0;
  h.coefficient = 0.5;
  h.total = dim;
  h.count = payload.size();
  const auto bytes = std::as_bytes(std::span<const std::uint8_t>(payload));
  h.payload_hash = gossip::payload_hash(bytes);
  from.send(to, gossip::encode_header(h), bytes, nullptr);
}

}  // namespace

TEST_CASE("a hostile in-neighbour's malformed compressed payloads are refused, never applied") {
  constexpr std::size_t kDim = 8;
  const auto s = testing::make_schedule(testing::Graph::ring, 2);  // 0 <-> 1, p = 0.5
  transport::InProcNetwork net(2);
  transport::InProcTransport mine(net, 0), hostile(net, 1);
  const auto every = compress::parse_compressor("topk:1", "--compress");
  const std::vector<float> v0 = {1, 2, 3, 4, 5, 6, 7, 8}, v1 = {3, 2, 1, 0, -1, -2, -3, -4};
  auto genuine = compress::encode(every, v1, 0);
  // An index past the vector: the last gap of 8 varints made too large.
  auto bad_index = genuine;
  bad_index.back() = 100;
  // Another count of coordinates than topk:1 sends (the receiver's rule).
  auto bad_count = compress::encode(compress::parse_compressor("topk:0.5", "--compress"), v1, 0);
  for (const auto& payload : {bad_index, bad_count, genuine}) {
    send_compressed(hostile, 0, payload, kDim);
  }
  compute::CpuBackend backend(1);
  std::vector<float> x = v0;
  gossip::PushSumConfig cfg;
  cfg.compressor = every;
  cfg.consensus_step = 1.0;               // plain push-sum on exact copies: x = (v0 + v1) / 2
  cfg.timeout = std::chrono::seconds(1);  // every message is in before mix()
  gossip::CompressedPushSum engine(backend, s, mine, x.data(), kDim, cfg);
  engine.mix();
  const auto m = engine.metrics();
  CHECK(m.rejected_for(gossip::RejectCause::bad_payload) == 2);
  CHECK(m.messages_received == 1);
  for (std::size_t d = 0; d < kDim; ++d) CHECK(x[d] == (v0[d] + v1[d]) / 2);
  CHECK(engine.weight() == 1.0);
  // Round 0 replayed: a duplicate; round 1 never comes, and the time-out names the sender.
  send_compressed(hostile, 0, genuine, kDim);
  CHECK_THROWS_AS(engine.mix(), IoError);  // round 1 never comes in acceptable form
  CHECK(engine.metrics().rejected_for(gossip::RejectCause::duplicate_round) == 1);
}

TEST_CASE("dtype 7 frames: one chunk of any length, coefficient 0 for a copy-only edge") {
  const gossip::Chunking whole(8, 0);
  const std::vector<std::uint8_t> payload = {1, 2, 3, 4, 5};
  auto decode = [&](std::uint32_t chunk, std::uint64_t count, double coefficient) {
    gossip::WireHeader h;
    h.dtype = gossip::kDtypeCompressed;
    h.sender = 1;
    h.chunk = chunk;
    h.weight = 1.0;
    h.coefficient = coefficient;
    h.total = 8;
    h.count = count;
    const auto bytes = std::as_bytes(std::span<const std::uint8_t>(payload));
    h.payload_hash = gossip::payload_hash(bytes);
    auto owner =
        std::make_shared<std::array<std::byte, gossip::kHeaderBytes>>(gossip::encode_header(h));
    transport::Message m({std::span<const std::byte>(*owner), bytes}, owner);
    auto r = gossip::decode_message(std::move(m), whole, 2, 0, gossip::kDtypeCompressed);
    auto* cause = std::get_if<gossip::RejectCause>(&r);
    return cause ? std::optional<gossip::RejectCause>(*cause) : std::nullopt;
  };
  CHECK(decode(0, 5, 0.0) == std::nullopt);  // bytes, not values: the compress decoder checks them
  CHECK(decode(0, 5, 0.5) == std::nullopt);
  CHECK(decode(1, 5, 0.5) == gossip::RejectCause::bad_size);
  CHECK(decode(0, 4, 0.5) == gossip::RejectCause::bad_size);
  CHECK(decode(0, 5, -0.5) == gossip::RejectCause::bad_weight);
  CHECK(decode(0, 5, 1.5) == gossip::RejectCause::bad_weight);
}

namespace {

// Two peers on the ring 0 <-> 1 (p = 0.5), both starting from x0, peer 0 then moved by `step` at
// coordinate `at` (an SGD step) once its engine is built; one round of topk with one coordinate a
// message at gamma 1.
std::vector<std::vector<float>> one_round_from_common_start(bool copies_start_at_x,
                                                            const std::vector<float>& x0,
                                                            std::size_t at, float step) {
  const std::size_t dim = x0.size();
  const auto s = testing::make_schedule(testing::Graph::ring, 2);
  transport::InProcNetwork net(2);
  gossip::PushSumConfig cfg;
  cfg.compressor = compress::parse_compressor(fmt::format("topk:{}", 1.0 / dim), "--compress");
  cfg.consensus_step = 1.0;
  cfg.copies_start_at_x = copies_start_at_x;
  cfg.timeout = std::chrono::seconds(10);
  std::vector<std::vector<float>> x(2, x0);
  std::vector<std::thread> peers;
  for (int rank = 0; rank < 2; ++rank) {
    peers.emplace_back([&, rank] {
      compute::CpuBackend backend(1);
      transport::InProcTransport transport(net, rank);
      gossip::CompressedPushSum engine(backend, s, transport, x[rank].data(), dim, cfg);
      if (rank == 0) x[0][at] += step;  // after the copies took x0
      engine.mix();
      engine.finish();
      CHECK(engine.weight() == 1.0);
    });
  }
  for (auto& p : peers) p.join();
  return x;
}

}  // namespace

TEST_CASE("copies that start at the common x0 send only what moved: the exact mean in one round") {
  const auto x0 = testing::initial_vector(0, 2, 16);
  constexpr std::size_t kAt = 5;
  constexpr float kStep = 4.0f;
  // The only difference from the copies is peer 0's step: topk's one coordinate carries it whole,
  // and one round at gamma 1 is push-sum on exact copies: x0 + step / 2 at `at` on both peers.
  for (const auto& x : one_round_from_common_start(true, x0, kAt, kStep)) {
    for (std::size_t d = 0; d < x0.size(); ++d) {
      CHECK(x[d] == doctest::Approx(x0[d] + (d == kAt ? kStep / 2 : 0.0f)).epsilon(1e-6));
    }
  }
  // From copies at zero the same coordinate is all each peer sends of its whole model: the rest
  // of x0 is mixed with copies still at zero, far from the mean.
  double worst = 0;
  for (const auto& x : one_round_from_common_start(false, x0, kAt, kStep)) {
    for (std::size_t d = 0; d < x0.size(); ++d) {
      worst = std::max(worst, double(std::abs(x[d] - x0[d] - (d == kAt ? kStep / 2 : 0.0f))));
    }
  }
  CHECK(worst > 0.1);
}
