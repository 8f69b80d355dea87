// --compress fp16 | bf16: the 16-bit conversions (known answers, every fp16 value round trips),
// the decoder's checks of the new dtypes, and push-sum with compressed payloads over the
// in-process transport: the sum of x over the peers is conserved up to float32 rounding (the
// sender keeps what rounding took off) and every peer converges to the mean within the format's
// precision, in sync and overlap mode.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <thread>

#include "sgp/compute/cpu_backend.hpp"
#include "sgp/gossip/half_float.hpp"
#include "sgp/gossip/push_sum_engine.hpp"
#include "sgp/gossip/wire_format.hpp"
#include "sgp/transport/inproc_transport.hpp"
#include "support/gossip_test_support.hpp"

using namespace sgp;
using gossip::Compression;

TEST_CASE("fp16 conversion: known answers, saturation, subnormals, ties to even") {
  CHECK(gossip::float_to_fp16(1.0f) == 0x3c00);
  CHECK(gossip::float_to_fp16(-2.0f) == 0xc000);
  CHECK(gossip::float_to_fp16(0.0f) == 0x0000);
  CHECK(gossip::float_to_fp16(-0.0f) == 0x8000);
  CHECK(gossip::float_to_fp16(65504.0f) == 0x7bff);
  CHECK(gossip::float_to_fp16(1e6f) == 0x7bff);  // saturates, never infinite
  CHECK(gossip::float_to_fp16(-1e30f) == 0xfbff);
  CHECK(gossip::float_to_fp16(std::ldexp(1.0f, -24)) == 0x0001);         // smallest subnormal
  CHECK(gossip::float_to_fp16(std::ldexp(1.0f, -25)) == 0x0000);         // a tie: to even (zero)
  CHECK(gossip::float_to_fp16(std::ldexp(3.0f, -25)) == 0x0002);         // a tie: to even (2)
  CHECK(gossip::float_to_fp16(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);  // tie, to even
  CHECK(gossip::float_to_fp16(1.0f + std::ldexp(3.0f, -11)) == 0x3c02);  // tie, to even
  CHECK(gossip::float_to_fp16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)) == 0x3c01);
  CHECK(gossip::float_to_fp16(INFINITY) == 0x7c00);
  CHECK((gossip::float_to_fp16(NAN) & 0x7fff) > 0x7c00);
  CHECK(gossip::fp16_to_float(0x3555) == 1365.0f / 4096.0f);  // 1.0101010101b x 2^-2
  CHECK(gossip::fp16_to_float(0x0001) == std::ldexp(1.0f, -24));
  CHECK(std::isinf(gossip::fp16_to_float(0xfc00)));
  // Every finite fp16 value converts to float and back to itself.
  for (std::uint32_t bits = 0; bits < 0x10000; ++bits) {
    if ((bits & 0x7c00) == 0x7c00) continue;
    const auto h = static_cast<std::uint16_t>(bits);
    if (gossip::float_to_fp16(gossip::fp16_to_float(h)) != h) FAIL("fp16 " << bits);
  }
}

TEST_CASE("the fp16 passes over vectors give the element functions' bits (F16C or not)") {
  // A million float bit patterns across every exponent, both signs, and the edges.
  std::vector<float> values;
  for (std::uint64_t bits = 0; bits < (std::uint64_t{1} << 32); bits += 4099) {
    values.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(bits)));
  }
  for (float v : {65504.0f, 65519.99f, 65520.0f, 1e5f, -1e5f, INFINITY, -INFINITY, NAN,
                  std::ldexp(1.0f, -25), std::ldexp(3.0f, -25), -0.0f}) {
    values.push_back(v);
  }
  const std::size_t n = values.size();  // not a multiple of 8: the tail takes the portable loop
  auto is_nan16 = [](std::uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; };
  auto same = [](float a, float b) {
    return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b) ||
           (std::isnan(a) && std::isnan(b));
  };
  std::vector<float> x = values;
  std::vector<std::uint16_t> out(n);
  gossip::compress_and_keep(Compression::fp16, x.data(), n, 0.75f, out.data());
  std::vector<float> y(n, 1.5f);
  gossip::add_decompressed(
      Compression::fp16,
      std::span<const std::byte>(reinterpret_cast<const std::byte*>(out.data()), 2 * n), 0.375f,
      y.data());
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint16_t h = gossip::float_to_fp16(values[i]);
    const bool ok = (out[i] == h || (is_nan16(out[i]) && is_nan16(h))) &&
                    same(x[i], values[i] - 0.75f * gossip::fp16_to_float(h)) &&
                    same(y[i], 1.5f + 0.375f * gossip::fp16_to_float(h));
    if (!ok && wrong++ < 5) {
      MESSAGE("value " << values[i] << ": " << out[i] << " vs " << h << ", kept " << x[i]);
    }
  }
  CHECK(wrong == 0);
  const std::string path = gossip::fp16_hardware_conversion() ? "with F16C" : "portable";
  MESSAGE("fp16 conversions " << path);
}

TEST_CASE("bf16 conversion: known answers, ties to even, every value round trips") {
  CHECK(gossip::float_to_bf16(1.0f) == 0x3f80);
  CHECK(gossip::float_to_bf16(-2.0f) == 0xc000);
  CHECK(gossip::float_to_bf16(std::bit_cast<float>(0x3f808000u)) == 0x3f80);  // tie, to even
  CHECK(gossip::float_to_bf16(std::bit_cast<float>(0x3f818000u)) == 0x3f82);  // tie, to even
  CHECK(gossip::float_to_bf16(std::bit_cast<float>(0x3f808001u)) == 0x3f81);
  CHECK(gossip::float_to_bf16(1e30f) == 0x714a);  // 0x7149f2ca rounded up
  CHECK((gossip::float_to_bf16(NAN) & 0x7fff) > 0x7f80);
  for (std::uint32_t bits = 0; bits < 0x10000; ++bits) {
    if ((bits & 0x7f80) == 0x7f80) continue;
    const auto h = static_cast<std::uint16_t>(bits);
    if (gossip::float_to_bf16(gossip::bf16_to_float(h)) != h) FAIL("bf16 " << bits);
  }
}

TEST_CASE("the decoder checks 16-bit payloads: dtype expected, size, finite values") {
  const gossip::Chunking chunking(4, 0);
  auto message = [](std::uint16_t dtype, std::vector<std::uint16_t> values) {
    gossip::WireHeader h;
    h.dtype = dtype;
    h.sender = 1;
    h.weight = 1.0;
    h.coefficient = 0.5;
    h.total = 4;
    h.count = 4;
    const auto* data = reinterpret_cast<const std::byte*>(values.data());
    const std::span<const std::byte> payload(data, values.size() * 2);
    h.payload_hash = gossip::payload_hash(payload);
    const auto head = gossip::encode_header(h);
    auto owner = std::make_shared<
        std::pair<std::array<std::byte, gossip::kHeaderBytes>, std::vector<std::uint16_t>>>(head,
                                                                                            values);
    std::vector<std::span<const std::byte>> frames = {
        std::span<const std::byte>(owner->first),
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(owner->second.data()),
                                   owner->second.size() * 2)};
    return transport::Message(std::move(frames), owner);
  };
  auto cause = [&](transport::Message m, std::uint16_t expected) {
    auto r = gossip::decode_message(std::move(m), chunking, 2, 0, expected);
    auto* c = std::get_if<gossip::RejectCause>(&r);
    return c ? *c : static_cast<gossip::RejectCause>(-1);
  };
  const std::vector<std::uint16_t> ones = {0x3c00, 0x3c00, 0x3c00, 0x3c00};
  CHECK(std::holds_alternative<gossip::DecodedMessage>(gossip::decode_message(
      message(gossip::kDtypeFloat16, ones), chunking, 2, 0, gossip::kDtypeFloat16)));
  // A peer sending fp16 to one that expects float32 (different --compress), and the reverse.
  CHECK(cause(message(gossip::kDtypeFloat16, ones), gossip::kDtypeFloat32) ==
        gossip::RejectCause::bad_dtype);
  CHECK(cause(message(gossip::kDtypeBfloat16, ones), gossip::kDtypeFloat16) ==
        gossip::RejectCause::bad_dtype);
  // 4 elements in 6 bytes.
  CHECK(cause(message(gossip::kDtypeFloat16, {1, 2, 3}), gossip::kDtypeFloat16) ==
        gossip::RejectCause::bad_size);
  CHECK(cause(message(gossip::kDtypeFloat16, {0x3c00, 0x7c00, 0, 0}), gossip::kDtypeFloat16) ==
        gossip::RejectCause::non_finite);
  CHECK(cause(message(gossip::kDtypeBfloat16, {0x3f80, 0xff81, 0, 0}), gossip::kDtypeBfloat16) ==
        gossip::RejectCause::non_finite);
  // 0x7c00 is a finite bf16 value (about 2.7e36).
  CHECK(std::holds_alternative<gossip::DecodedMessage>(gossip::decode_message(
      message(gossip::kDtypeBfloat16, {0x7c00, 0, 0, 0}), chunking, 2, 0, gossip::kDtypeBfloat16)));
}

namespace {

// Rank r's vector: values in about [-1, 1] with no short binary expansion, so that neither format
// represents them or their mean exactly.
std::vector<float> start_vector(int rank, std::size_t dim) {
  std::vector<float> x(dim);
  for (std::size_t d = 0; d < dim; ++d) {
    x[d] = static_cast<float>(std::sin(0.37 * static_cast<double>(d) + 1.3 * rank) +
                              0.01 * static_cast<double>(rank));
  }
  return x;
}

struct Outcome {
  std::vector<std::vector<float>> x, z;
  double weight_sum = 0;
  std::vector<std::string> errors;
  std::uint64_t bytes_sent = 0, rejected = 0;
};

Outcome run(const topology::Schedule& s, std::size_t dim, int rounds, gossip::PushSumConfig cfg) {
  const int n = s.num_peers();
  transport::InProcNetwork net(n);
  Outcome out;
  out.x.resize(n);
  out.z.resize(n);
  out.errors.resize(n);
  std::vector<double> w(n);
  std::vector<gossip::PushSumMetrics> metrics(n);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        compute::CpuBackend backend(1);
        transport::InProcTransport transport(net, rank);
        std::vector<float> x = start_vector(rank, dim);
        gossip::PushSumEngine engine(backend, s, transport, x.data(), dim, cfg);
        for (int k = 0; k < rounds; ++k) engine.step(k);
        engine.finish();
        std::vector<float> z(dim);
        engine.debias(z.data());
        out.x[rank] = x;
        out.z[rank] = z;
        w[rank] = engine.weight();
        metrics[rank] = engine.metrics();
      } catch (const std::exception& e) {
        out.errors[rank] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    out.weight_sum += w[r];
    out.bytes_sent += metrics[r].bytes_sent;
    out.rejected += metrics[r].rejected_total();
  }
  return out;
}

}  // namespace

TEST_CASE("compressed push-sum conserves the sum of x and converges to the mean within precision") {
  constexpr std::size_t kDim = 1000;
  constexpr int kRounds = 200;
  struct Format {
    Compression compression;
    double tolerance;
  };
  // 16-bit formats: 3 unit roundoffs u (u: half the spacing of the numbers just above 1). Each
  // round leaves a fresh rounding error of up to u |x| with the sender, and overlap mode's order
  // of arrivals varies: measured up to 1.45 u (fp16) and 1.9 u (bf16) in 12 runs.
  // float32: the floor its rounding leaves on slow graphs (gossip_test_support.hpp).
  for (auto format :
       {Format{Compression::none, 1e-5}, Format{Compression::fp16, 3 * std::ldexp(1.0, -11)},
        Format{Compression::bf16, 3 * std::ldexp(1.0, -8)}}) {
    for (auto mode : {gossip::Mode::sync, gossip::Mode::overlap}) {
      // A column-stochastic graph that is not doubly stochastic (w moves) and the 8-peer
      // one-peer exponential graph; 5-element chunks for the first.
      for (const auto& variant :
           {std::pair{testing::Graph::ring, 5}, std::pair{testing::Graph::exponential, 8}}) {
        const testing::Graph graph = variant.first;
        const int n = variant.second;
        const auto s = testing::make_schedule(graph, n);
        CAPTURE(name_of(format.compression));
        CAPTURE(name_of(mode));
        CAPTURE(testing::graph_name(graph));
        gossip::PushSumConfig cfg;
        cfg.mode = mode;
        cfg.compression = format.compression;
        cfg.chunk_elements = graph == testing::Graph::ring ? 5 : 0;
        cfg.timeout = std::chrono::seconds(20);
        const auto out = run(s, kDim, kRounds, cfg);
        for (const auto& e : out.errors) REQUIRE_MESSAGE(e.empty(), e);
        CHECK(out.rejected == 0);
        CHECK(out.weight_sum == doctest::Approx(n).epsilon(1e-12));
        // Conservation: the sum of x over the peers against the initial sum, element by element,
        // relative to the largest initial sum.
        double drift = 0, scale = 0, error = 0, mean_scale = 0;
        for (std::size_t d = 0; d < kDim; ++d) {
          double start = 0, now = 0;
          for (int r = 0; r < n; ++r) {
            start += start_vector(r, kDim)[d];
            now += out.x[r][d];
          }
          drift = std::max(drift, std::abs(now - start));
          scale = std::max(scale, std::abs(start));
          const double mean = start / n;
          mean_scale = std::max(mean_scale, std::abs(mean));
          for (int r = 0; r < n; ++r) error = std::max(error, std::abs(out.z[r][d] - mean));
        }
        const double relative_drift = drift / scale;
        const double relative_error = error / mean_scale;
        MESSAGE(name_of(format.compression)
                << " " << name_of(mode) << " " << testing::graph_name(graph) << " N=" << n
                << ": relative drift of sum x after " << kRounds << " rounds " << relative_drift
                << ", max |z - mean| / max |mean| " << relative_error);
        // Float32 rounding of the sender's subtraction and the receivers' adds, a few ulps per
        // round at most: far below what one rounding to 16 bits would lose.
        CHECK(relative_drift < kRounds * 8 * std::ldexp(1.0, -24));
        // Within the format's precision (the values are at most about 1).
        CHECK(relative_error < format.tolerance);
        // Payloads of 2 bytes per element with a 16-bit format, headers as before.
        const gossip::Chunking chunking(kDim, cfg.chunk_elements);
        const std::uint64_t element = format.compression == Compression::none ? 4 : 2;
        std::uint64_t expected = 0;
        for (int k = 0; k < kRounds; ++k) {
          for (int r = 0; r < n; ++r) {
            expected += s.out_edges(r, k).size() *
                        (chunking.chunks() * gossip::kHeaderBytes + kDim * element);
          }
        }
        CHECK(out.bytes_sent == expected);
      }
    }
  }
}
