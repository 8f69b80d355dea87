// The wire format: a header survives encode/decode; every malformed field is refused with its
// own cause.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <set>

#include "sgp/error.hpp"
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

Frames valid(std::size_t n = 8) {
  Frames f;
  for (std::size_t i = 0; i < n; ++i) f.payload.push_back(static_cast<float>(i) * 0.5f - 1.0f);
  WireHeader h{3, 17, 0.75, 0.25, n, payload_hash(std::as_bytes(std::span(f.payload)))};
  auto bytes = encode_header(h);
  f.header.assign(bytes.begin(), bytes.end());
  return f;
}

RejectCause cause_of(const transport::Message& m, std::uint64_t n = 8) {
  auto r = decode_message(m, n, 5, 0);
  REQUIRE(std::holds_alternative<RejectCause>(r));
  return std::get<RejectCause>(r);
}

}  // namespace

TEST_CASE("a valid message decodes to the fields it was encoded with") {
  auto r = decode_message(valid().message(), 8, 5, 0);
  REQUIRE(std::holds_alternative<DecodedMessage>(r));
  const auto& d = std::get<DecodedMessage>(r);
  CHECK(d.header.sender == 3);
  CHECK(d.header.round == 17);
  CHECK(d.header.weight == 0.75);
  CHECK(d.header.coefficient == 0.25);
  CHECK(d.header.count == 8);
  CHECK(d.payload.size() == 32);
}

TEST_CASE("every malformed field has its own reject cause") {
  auto f = valid();
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
  auto patched = [&](std::size_t offset, auto value, bool rehash) {
    auto g = f;
    std::memcpy(g.header.data() + offset, &value, sizeof value);
    if (rehash) {
      // Re-encode the header hash so that the field itself is what gets checked.
      WireHeader h;
      std::memcpy(&h.sender, g.header.data() + 8, 4);
      std::memcpy(&h.round, g.header.data() + 16, 8);
      std::memcpy(&h.weight, g.header.data() + 24, 8);
      std::memcpy(&h.coefficient, g.header.data() + 32, 8);
      std::memcpy(&h.count, g.header.data() + 40, 8);
      std::memcpy(&h.payload_hash, g.header.data() + 48, 8);
      auto fresh = encode_header(h);
      std::memcpy(fresh.data() + offset, &value, sizeof value);
      // encode_header fixed magic/version/dtype: recompute the hash over the patched bytes.
      g.header.assign(fresh.begin(), fresh.end());
      const auto hash = gossip::payload_hash(std::span(g.header).first(56));
      std::memcpy(g.header.data() + 56, &hash, 8);
    }
    return g;
  };
  CHECK(cause_of(patched(0, std::uint32_t{0xdeadbeef}, false).message()) == RejectCause::bad_magic);
  CHECK(cause_of(patched(4, std::uint16_t{2}, false).message()) == RejectCause::bad_version);
  CHECK(cause_of(patched(16, std::int64_t{18}, false).message()) == RejectCause::header_checksum);
  CHECK(cause_of(patched(6, std::uint16_t{7}, true).message()) == RejectCause::bad_dtype);
  CHECK(cause_of(patched(40, std::uint64_t{9}, true).message()) == RejectCause::bad_size);
  CHECK(cause_of(f.message(), 9) == RejectCause::bad_size);
  CHECK(cause_of(patched(8, std::int32_t{5}, true).message()) == RejectCause::unknown_sender);
  CHECK(cause_of(patched(8, std::int32_t{0}, true).message()) == RejectCause::unknown_sender);
  CHECK(cause_of(patched(8, std::int32_t{-1}, true).message()) == RejectCause::unknown_sender);
  CHECK(cause_of(patched(24, std::nan(""), true).message()) == RejectCause::bad_weight);
  CHECK(cause_of(patched(24, -1.0, true).message()) == RejectCause::bad_weight);
  CHECK(cause_of(patched(32, 1.5, true).message()) == RejectCause::bad_weight);
  {
    auto g = f;
    g.payload[2] = 100.0f;
    CHECK(cause_of(g.message()) == RejectCause::payload_checksum);
  }
}

TEST_CASE("every reject cause has a distinct name") {
  std::set<std::string_view> names;
  for (int c = 0; c < kNumRejectCauses; ++c) names.insert(reject_cause_name(RejectCause(c)));
  CHECK(names.size() == static_cast<std::size_t>(kNumRejectCauses));
  CHECK(names.count("unknown") == 0);
}

TEST_CASE("gossip mode names parse, others are an InputError naming the flag") {
  CHECK(parse_mode("sync") == Mode::sync);
  CHECK(parse_mode("overlap") == Mode::overlap);
  CHECK_THROWS_WITH_AS(parse_mode("async"), doctest::Contains("--mode: 'async'"), InputError);
}
