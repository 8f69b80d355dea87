// The wire format: a header survives encode/decode; every malformed field is refused with its
// own cause.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <set>
#include <span>
#include <vector>

#include "sgp/error.hpp"
#include "sgp/gossip/control_message.hpp"
#include "sgp/gossip/push_sum_config.hpp"
#include "sgp/gossip/wire_format.hpp"

using namespace sgp;
using namespace sgp::gossip;

namespace {

struct Frames {
  std::vector<std::byte> header;
  std::vector<float> payload;
  transport::Message message() const {
    auto copy = std::make_shared<Frames>(*this);
    std::vector<std::span<const std::byte>> frames{std::span<const std::byte>(copy->header),
                                                   std::as_bytes(std::span(copy->payload))};
    return transport::Message(std::move(frames), copy);
  }
};

// Chunk `chunk` of a vector of `total` elements cut into chunks of 4 (values 0.5 i - 1).
Frames valid(std::uint64_t total = 8, std::uint32_t chunk = 0) {
  const Chunking layout(total, 4);
  Frames f;
  for (std::uint64_t i = layout.offset(chunk); i < layout.offset(chunk) + layout.size(chunk); ++i) {
    f.payload.push_back(static_cast<float>(i) * 0.5f - 1.0f);
  }
  WireHeader h;
  h.sender = 3;
  h.chunk = chunk;
  h.round = 17;
  h.weight = 0.75;
  h.coefficient = 0.25;
  h.total = total;
  h.offset = layout.offset(chunk);
  h.count = layout.size(chunk);
  h.payload_hash = payload_hash(std::as_bytes(std::span(f.payload)));
  auto bytes = encode_header(h);
  f.header.assign(bytes.begin(), bytes.end());
  return f;
}

RejectCause cause_of(const transport::Message& m, std::uint64_t total = 8) {
  auto r = decode_message(m, Chunking(total, 4), 5, 0);
  REQUIRE(std::holds_alternative<RejectCause>(r));
  return std::get<RejectCause>(r);
}

// `f` with `value` written at header byte `offset`; with rehash, the header hash is made valid
// again so that the field itself is what gets checked.
template <class T>
Frames patched(const Frames& f, std::size_t offset, T value, bool rehash) {
  Frames g = f;
  std::memcpy(g.header.data() + offset, &value, sizeof value);
  if (rehash) {
    const auto hash = payload_hash(std::span<const std::byte>(g.header).first(72));
    std::memcpy(g.header.data() + 72, &hash, 8);
  }
  return g;
}

}  // namespace

TEST_CASE("chunking: at most 256 chunks, the last one shorter, 0 = one chunk") {
  const Chunking a(10, 4);
  CHECK(a.chunks() == 3);
  CHECK(a.offset(2) == 8);
  CHECK(a.size(2) == 2);
  CHECK(Chunking(10, 0).chunks() == 1);
  CHECK(Chunking(10, 100).chunks() == 1);
  const Chunking big(37'500'000, 262'144);
  CHECK(big.chunks() == 144);
  const Chunking capped(1'000'000, 1);
  CHECK(capped.chunks() == 256);
  CHECK(capped.per_chunk == 3907);
  std::uint64_t sum = 0;
  for (std::uint32_t c = 0; c < capped.chunks(); ++c) sum += capped.size(c);
  CHECK(sum == 1'000'000);
}

TEST_CASE("a valid chunk decodes to the fields it was encoded with") {
  for (std::uint32_t chunk : {0u, 1u, 2u}) {
    auto r = decode_message(valid(10, chunk).message(), Chunking(10, 4), 5, 0);
    REQUIRE(std::holds_alternative<DecodedMessage>(r));
    const auto& d = std::get<DecodedMessage>(r);
    CHECK(d.header.sender == 3);
    CHECK(d.header.chunk == chunk);
    CHECK(d.header.round == 17);
    CHECK(d.header.weight == 0.75);
    CHECK(d.header.coefficient == 0.25);
    CHECK(d.header.total == 10);
    CHECK(d.header.offset == 4 * chunk);
    CHECK(d.payload.size() == (chunk == 2 ? 8u : 16u));
  }
}

TEST_CASE("every malformed field has its own reject cause") {
  const auto f = valid();
  CHECK(cause_of(transport::Message({std::span<const std::byte>(f.header)}, nullptr)) ==
        RejectCause::frame_count);
  {
    auto g = f;
    g.header.resize(40);
    CHECK(cause_of(g.message()) == RejectCause::header_size);
    g = f;
    g.header.push_back(std::byte{0});
    CHECK(cause_of(g.message()) == RejectCause::header_size);
  }
  CHECK(cause_of(patched(f, 0, std::uint32_t{0xdeadbeef}, false).message()) ==
        RejectCause::bad_magic);
  CHECK(cause_of(patched(f, 4, std::uint16_t{2}, false).message()) == RejectCause::bad_version);
  CHECK(cause_of(patched(f, 16, std::int64_t{18}, false).message()) ==
        RejectCause::header_checksum);
  CHECK(cause_of(patched(f, 6, std::uint16_t{7}, true).message()) == RejectCause::bad_dtype);
  // Sizes: total, chunk index, offset, count, and the payload against count.
  CHECK(cause_of(f.message(), 9) == RejectCause::bad_size);
  CHECK(cause_of(patched(f, 40, std::uint64_t{9}, true).message()) == RejectCause::bad_size);
  CHECK(cause_of(patched(f, 12, std::uint32_t{2}, true).message()) == RejectCause::bad_size);
  CHECK(cause_of(patched(f, 48, std::uint64_t{1}, true).message()) == RejectCause::bad_size);
  CHECK(cause_of(patched(f, 56, std::uint64_t{3}, true).message()) == RejectCause::bad_size);
  {
    auto g = f;
    g.payload.push_back(1.0f);
    CHECK(cause_of(g.message()) == RejectCause::bad_size);
    g = f;
    g.payload.pop_back();
    CHECK(cause_of(g.message()) == RejectCause::bad_size);
  }
  CHECK(cause_of(patched(f, 8, std::int32_t{5}, true).message()) == RejectCause::unknown_sender);
  CHECK(cause_of(patched(f, 8, std::int32_t{0}, true).message()) == RejectCause::unknown_sender);
  CHECK(cause_of(patched(f, 8, std::int32_t{-1}, true).message()) == RejectCause::unknown_sender);
  CHECK(cause_of(patched(f, 24, std::nan(""), true).message()) == RejectCause::bad_weight);
  CHECK(cause_of(patched(f, 24, -1.0, true).message()) == RejectCause::bad_weight);
  CHECK(cause_of(patched(f, 32, 1.5, true).message()) == RejectCause::bad_weight);
  {
    auto g = f;
    g.payload[2] = 100.0f;
    CHECK(cause_of(g.message()) == RejectCause::payload_checksum);
  }
}

TEST_CASE("implausible values are refused: weight beyond N, NaN and infinite payloads") {
  const auto f = valid();  // 5 peers
  CHECK(cause_of(patched(f, 24, 1e300, true).message()) == RejectCause::bad_weight);
  CHECK(cause_of(patched(f, 24, 5.01, true).message()) == RejectCause::bad_weight);
  CHECK(std::holds_alternative<DecodedMessage>(
      decode_message(patched(f, 24, 5.0, true).message(), Chunking(8, 4), 5, 0)));
  for (float bad : {std::nanf(""), -std::nanf(""), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    CAPTURE(bad);
    auto g = f;
    g.payload[1] = bad;  // with a valid payload hash: a sender that diverged
    const auto hash = payload_hash(std::as_bytes(std::span(g.payload)));
    CHECK(cause_of(patched(g, 64, hash, true).message()) == RejectCause::non_finite);
  }
  // The largest finite float and denormals are values like any other.
  auto g = f;
  g.payload[0] = std::numeric_limits<float>::max();
  g.payload[1] = -std::numeric_limits<float>::denorm_min();
  const auto hash = payload_hash(std::as_bytes(std::span(g.payload)));
  CHECK(std::holds_alternative<DecodedMessage>(
      decode_message(patched(g, 64, hash, true).message(), Chunking(8, 4), 5, 0)));
}

TEST_CASE("parse_header: the claimed fields of a well-formed header, nothing otherwise") {
  const auto f = valid();
  const auto h = parse_header(f.header);
  REQUIRE(h.has_value());
  CHECK(h->sender == 3);
  CHECK(h->round == 17);
  CHECK_FALSE(parse_header(patched(f, 16, std::int64_t{18}, false).header).has_value());
  CHECK_FALSE(parse_header(std::span<const std::byte>(f.header).first(79)).has_value());
}

TEST_CASE("every reject cause has a distinct name") {
  std::set<std::string_view> names;
  for (int c = 0; c < kNumRejectCauses; ++c) names.insert(reject_cause_name(RejectCause(c)));
  CHECK(names.size() == static_cast<std::size_t>(kNumRejectCauses));
  CHECK(names.count("unknown") == 0);
}

TEST_CASE("gossip mode names parse, others are an InputError naming the flag") {
  CHECK(parse_name<Mode>("sync", "--mode") == Mode::sync);
  CHECK(parse_name<Mode>("overlap", "--mode") == Mode::overlap);
  CHECK(parse_name<Mode>("async", "--mode") == Mode::async);
  CHECK_THROWS_WITH_AS(
      parse_name<Mode>("asynchronous", "--mode"),
      doctest::Contains("--mode: 'asynchronous' is not one of sync, overlap, async"), InputError);
}

TEST_CASE("all_finite: NaN and infinities refused in float32 payloads and float64 totals") {
  auto bytes = [](const auto& values) { return std::as_bytes(std::span(values)); };
  const float big32 = std::numeric_limits<float>::max();
  const double big64 = std::numeric_limits<double>::max();
  CHECK(all_finite(bytes(std::vector<float>{1.0f, -big32, big32})));
  CHECK(all_finite(bytes(std::vector<double>{1.0, -big64, big64}), kDtypeFloat64Total));
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    CHECK_FALSE(all_finite(bytes(std::vector<float>{1.0f, bad, 2.0f})));
  }
  for (double bad :
       {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
        -std::numeric_limits<double>::infinity()}) {
    CHECK_FALSE(all_finite(bytes(std::vector<double>{1.0, 2.0, bad}), kDtypeFloat64Total));
  }
}

// The check runs as a vector loop (vector_clones.hpp) with a scalar tail: a bad value is found at
// every place of a payload longer than any vector, at any alignment, in every width, and the
// largest finite values, denormals and signed zeros pass.
TEST_CASE("all_finite: every place, alignment and dtype of a long payload") {
  struct Width {
    std::uint16_t dtype;
    std::size_t bytes;
    std::uint64_t infinity, largest_finite, nan, denormal;
  };
  const Width widths[] = {
      {kDtypeFloat64Total, 8, 0x7ff0000000000000u, 0x7fefffffffffffffu, 0x7ff0000000000001u, 1},
      {kDtypeFloat32, 4, 0x7f800000u, 0x7f7fffffu, 0x7fc00000u, 1},
      {kDtypeFloat32Delta, 4, 0x7f800000u, 0x7f7fffffu, 0x7f800001u, 1},
      {kDtypeFloat16, 2, 0x7c00u, 0x7bffu, 0x7e00u, 1},
      {kDtypeBfloat16, 2, 0x7f80u, 0x7f7fu, 0x7fc1u, 1},
  };
  constexpr std::size_t kCount = 131;  // over two 64-byte vectors of any width, and a tail
  for (const auto& width : widths) {
    const std::uint64_t sign = std::uint64_t{1} << (8 * width.bytes - 1);
    const std::uint64_t fine[] = {width.largest_finite, width.largest_finite | sign, width.denormal,
                                  sign, 0};
    for (std::size_t misalign : {0, 1, 3}) {
      std::vector<std::byte> storage(misalign + kCount * width.bytes);
      const std::span<std::byte> payload(storage.data() + misalign, kCount * width.bytes);
      const auto put = [&](std::size_t k, std::uint64_t bits) {
        std::memcpy(payload.data() + k * width.bytes, &bits, width.bytes);  // little-endian
      };
      for (std::size_t k = 0; k < kCount; ++k) put(k, fine[k % std::size(fine)]);
      CAPTURE(width.dtype);
      CAPTURE(misalign);
      CHECK(all_finite(payload, width.dtype));
      for (std::size_t bad_at = 0; bad_at < kCount; ++bad_at) {
        for (std::uint64_t bad : {width.infinity, width.infinity | sign, width.nan}) {
          put(bad_at, bad);
          CAPTURE(bad_at);
          CHECK_FALSE(all_finite(payload, width.dtype));
        }
        put(bad_at, fine[bad_at % std::size(fine)]);
      }
    }
  }
}

namespace {

// A control notice as the transport delivers it: the 40-byte header frame and a payload frame.
transport::Message control_frames(const std::array<std::byte, gossip::kControlBytes>& header,
                                  std::vector<std::byte> payload = {}) {
  struct Owned {
    std::array<std::byte, gossip::kControlBytes> header;
    std::vector<std::byte> payload;
  };
  auto owned = std::make_shared<Owned>(Owned{header, std::move(payload)});
  std::vector<std::span<const std::byte>> frames{std::span<const std::byte>(owned->header),
                                                 std::span<const std::byte>(owned->payload)};
  return transport::Message(std::move(frames), owned);
}

}  // namespace

TEST_CASE("control notices: a pace notice round-trips; unknown kinds and stray payloads refused") {
  gossip::ControlMessage pace{gossip::ControlKind::pace, 2, 2, 0, 48'250};
  pace.detail = 9'125;
  const auto decoded = gossip::decode_control(control_frames(gossip::encode_control(pace)), 4, 1);
  REQUIRE(std::holds_alternative<gossip::DecodedControl>(decoded));
  const auto& c = std::get<gossip::DecodedControl>(decoded).control;
  CHECK(c.kind == gossip::ControlKind::pace);
  CHECK(c.sender == 2);
  CHECK(c.round == 48'250);  // microseconds per round
  CHECK(c.detail == 9'125);  // ... of which busy
  // Only admissions, leaves and resume offers carry a payload.
  const auto with_payload = gossip::decode_control(
      control_frames(gossip::encode_control(pace), std::vector<std::byte>(8)), 4, 1);
  CHECK(std::get<RejectCause>(with_payload) == RejectCause::bad_size);
  // Kind 15 does not exist (the header checksum is recomputed, so only the kind is wrong).
  auto unknown = pace;
  unknown.kind = static_cast<gossip::ControlKind>(15);
  const auto refused =
      gossip::decode_control(control_frames(gossip::encode_control(unknown)), 4, 1);
  CHECK(std::get<RejectCause>(refused) == RejectCause::bad_dtype);
  // A push acknowledgement is for the pusher alone; an alive notice speaks for its sender only.
  const gossip::ControlMessage ack{gossip::ControlKind::push_ack, 2, 1, 0, 7};
  CHECK(std::holds_alternative<gossip::DecodedControl>(
      gossip::decode_control(control_frames(gossip::encode_control(ack)), 4, 1)));
  CHECK(std::get<RejectCause>(gossip::decode_control(control_frames(gossip::encode_control(ack)), 4,
                                                     3)) == RejectCause::not_entitled);
  const gossip::ControlMessage alive{gossip::ControlKind::alive, 2, 0, 0, 7};
  CHECK(std::get<RejectCause>(gossip::decode_control(control_frames(gossip::encode_control(alive)),
                                                     4, 1)) == RejectCause::not_entitled);
}

TEST_CASE("control notices: a pause notice round-trips, and only about its own sender") {
  const gossip::ControlMessage pause{gossip::ControlKind::pause, 2, 2, 0, 600};
  const auto decoded = gossip::decode_control(control_frames(gossip::encode_control(pause)), 4, 1);
  REQUIRE(std::holds_alternative<gossip::DecodedControl>(decoded));
  CHECK(std::get<gossip::DecodedControl>(decoded).control.kind == gossip::ControlKind::pause);
  CHECK(std::get<gossip::DecodedControl>(decoded).control.round == 600);  // milliseconds
  auto for_another = pause;  // rank 2 may not say that rank 3 pauses
  for_another.subject = 3;
  const auto refused =
      gossip::decode_control(control_frames(gossip::encode_control(for_another)), 4, 1);
  CHECK(std::get<RejectCause>(refused) == RejectCause::not_entitled);
}
