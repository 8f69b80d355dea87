// Compressors (sgp/compress/compressor.hpp): round trips with known answers, error feedback's
// bookkeeping, and malformed payloads refused with their reason, the target untouched.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "sgp/compress/compressor.hpp"

using namespace sgp::compress;

namespace {

std::vector<float> sample_vector(std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t k = 0; k < n; ++k) {
    v[k] = static_cast<float>((static_cast<int>((k * 37) % 101) - 50)) * 0.25f;
  }
  return v;
}

std::vector<float> decoded(const Compressor& c, const std::vector<std::uint8_t>& payload,
                           std::size_t n) {
  std::vector<float> out(n, 0.0f);
  decode_add(c, std::span<const std::uint8_t>(payload), std::span<float>(out));
  return out;
}

Refusal refusal_of(const Compressor& c, const std::vector<std::uint8_t>& payload, std::size_t n) {
  std::vector<float> target(n, 7.0f);
  try {
    decode_add(c, std::span<const std::uint8_t>(payload), std::span<float>(target));
  } catch (const PayloadError& e) {
    for (float t : target) REQUIRE(t == 7.0f);  // never applied
    return e.reason();
  }
  FAIL("the payload was accepted");
  return Refusal::wrong_kind;
}

}  // namespace

TEST_CASE("parse_compressor reads the four kinds and refuses the rest, naming the flag") {
  CHECK(parse_compressor("topk:0.01", "--compress").kind == Kind::topk);
  CHECK(parse_compressor("randk:0.5", "--compress").ratio == 0.5);
  CHECK(parse_compressor("sign", "--compress").kind == Kind::sign);
  CHECK(parse_compressor("qsgd:4", "--compress").levels == 4);
  CHECK(compressor_name(parse_compressor("qsgd:4", "--compress")) == "qsgd:4");
  for (const char* bad : {"topk", "topk:0", "topk:1.5", "randk:x", "sign:1", "qsgd:0", "qsgd:2.5",
                          "qsgd:40000", "fp8", "topk:0.1x"}) {
    CHECK_THROWS_WITH_AS(parse_compressor(bad, "--compress"),
                         doctest::Contains((std::string("--compress ") + bad).c_str()),
                         sgp::InputError);
  }
}

TEST_CASE("topk sends the largest coordinates exactly, with compact indices") {
  std::vector<float> v(1000, 0.0f);
  v[3] = -5.0f;
  v[500] = 4.0f;
  v[999] = 3.0f;
  v[10] = 1.0f;
  const Compressor c{Kind::topk, 0.003, 0};  // k = 3
  const auto payload = encode(c, v, 0);
  CHECK(payload.size() == 5 + 4 + 3 * 4 + 1 + 2 + 2);  // header, k, values, varint gaps
  const auto out = decoded(c, payload, v.size());
  for (std::size_t k = 0; k < v.size(); ++k) CHECK(out[k] == (k == 10 ? 0.0f : v[k]));
}

TEST_CASE("randk regenerates its indices from the seed in the payload") {
  const auto v = sample_vector(500);
  const Compressor c{Kind::randk, 0.1, 0};
  const auto a = decoded(c, encode(c, v, 42), v.size());
  const auto b = decoded(c, encode(c, v, 43), v.size());
  std::size_t sent_a = 0, differ = 0;
  for (std::size_t k = 0; k < v.size(); ++k) {
    CHECK((a[k] == 0.0f || a[k] == v[k]));
    if (a[k] == v[k] && v[k] != 0.0f) ++sent_a;
    if (a[k] != b[k]) ++differ;
  }
  CHECK(sent_a >= 45);  // 50 drawn; a few of v's values are 0
  CHECK(differ > 0);    // another seed, other indices
  CHECK(encode(c, v, 42).size() == 5 + 4 + 8 + 50 * 4);
}

TEST_CASE("sign sends ||v||_1 / n times the signs; qsgd's levels decode to norm * l / L") {
  const std::vector<float> v{1.0f, -3.0f, 0.0f, 4.0f, -2.0f};
  const Compressor sign{Kind::sign, 0, 0};
  const auto s = decoded(sign, encode(sign, v, 0), v.size());
  CHECK(s == std::vector<float>{2.0f, -2.0f, 2.0f, 2.0f, -2.0f});
  CHECK(encode(sign, v, 0).size() == 5 + 4 + 1);
  // 21 values: two whole bytes of signs and a tail, LSB first (value k is bit k % 8 of byte
  // k / 8), each decoded to +-mean|w| = +-11.
  std::vector<float> w(21);
  for (int k = 0; k < 21; ++k) w[k] = static_cast<float>(k % 3 == 0 ? -(k + 1) : k + 1);
  const auto pw = encode(sign, w, 0);
  REQUIRE(pw.size() == 5 + 4 + 3);
  const auto dw = decoded(sign, pw, w.size());
  for (int k = 0; k < 21; ++k) {
    CAPTURE(k);
    CHECK(((pw[9 + k / 8] >> (k % 8)) & 1) == (w[k] < 0.0f ? 1 : 0));
    CHECK(dw[k] == (w[k] < 0.0f ? -11.0f : 11.0f));
  }
  // qsgd:1 on a vector with one non-zero coordinate: |v_k| / norm = 1, level 1 for sure.
  const std::vector<float> e{0.0f, -6.0f, 0.0f};
  const Compressor q{Kind::qsgd, 0, 1};
  CHECK(decoded(q, encode(q, e, 9), e.size()) == e);
  // Unbiased: the mean of many seeds' decodings approaches v.
  const Compressor q4{Kind::qsgd, 0, 4};
  std::vector<double> mean(v.size(), 0.0);
  for (std::uint64_t seed = 0; seed < 4000; ++seed) {
    const auto d = decoded(q4, encode(q4, v, seed), v.size());
    for (std::size_t k = 0; k < v.size(); ++k) mean[k] += d[k] / 4000.0;
  }
  for (std::size_t k = 0; k < v.size(); ++k) CHECK(mean[k] == doctest::Approx(v[k]).epsilon(0.02));
}

TEST_CASE("error feedback: residual + sent == meant, exactly for topk and randk") {
  const auto v = sample_vector(300);
  for (const char* spec : {"topk:0.05", "randk:0.05", "sign", "qsgd:3"}) {
    CAPTURE(spec);
    const Compressor c = parse_compressor(spec, "--compress");
    std::vector<float> residual(v.size(), 0.0f);
    for (std::uint64_t round = 0; round < 3; ++round) {
      std::vector<float> meant(v.size());
      for (std::size_t k = 0; k < v.size(); ++k) meant[k] = v[k] + residual[k];
      const auto payload = encode_with_feedback(c, v, residual, round);
      const auto sent = decoded(c, payload, v.size());
      for (std::size_t k = 0; k < v.size(); ++k) {
        const double error = std::fabs(double{residual[k]} + sent[k] - meant[k]);
        if (c.kind == Kind::topk || c.kind == Kind::randk) {
          REQUIRE(residual[k] + sent[k] == meant[k]);
        } else {
          REQUIRE(error <= std::ldexp(std::fabs(double{residual[k]}), -23));
        }
      }
    }
  }
}

TEST_CASE("malformed payloads are refused with their reason, never applied") {
  const std::vector<float> v{1.0f, -3.0f, 0.5f, 4.0f, -2.0f, 0.0f, 7.0f, -1.0f, 2.0f, 3.0f};
  const Compressor topk{Kind::topk, 0.2, 0};  // k = 2: indices 3 and 6, gaps 3 and 2
  auto p = encode(topk, v, 0);
  REQUIRE(p.size() == 5 + 4 + 8 + 2);
  CHECK(refusal_of({Kind::sign, 0, 0}, p, v.size()) == Refusal::wrong_kind);
  CHECK(refusal_of(topk, p, v.size() + 1) == Refusal::wrong_length);
  CHECK(refusal_of(topk, std::vector<std::uint8_t>(p.begin(), p.end() - 1), v.size()) ==
        Refusal::truncated);
  auto longer = p;
  longer.push_back(0);
  CHECK(refusal_of(topk, longer, v.size()) == Refusal::trailing_bytes);
  CHECK(refusal_of({Kind::topk, 0.3, 0}, p, v.size()) == Refusal::bad_count);
  auto past_end = p;
  past_end.back() = 6;  // second index 3 + 1 + 6 = 10: past the end
  CHECK(refusal_of(topk, past_end, v.size()) == Refusal::bad_index);
  auto endless = p;
  endless[p.size() - 2] = 0xff;  // a varint that never ends
  endless.back() = 0xff;
  CHECK(refusal_of(topk, endless, v.size()) == Refusal::truncated);
  auto nan = p;
  const float not_a_number = std::nanf("");
  std::memcpy(&nan[9], &not_a_number, 4);
  CHECK(refusal_of(topk, nan, v.size()) == Refusal::not_finite);

  const Compressor sign{Kind::sign, 0, 0};
  auto s = encode(sign, v, 0);
  REQUIRE(s.size() == 5 + 4 + 2);
  auto negative = s;
  const float minus_one = -1.0f;
  std::memcpy(&negative[5], &minus_one, 4);
  CHECK(refusal_of(sign, negative, v.size()) == Refusal::bad_scale);
  auto padding = s;
  padding.back() |= 0x80;  // bit 15: past the 10 values
  CHECK(refusal_of(sign, padding, v.size()) == Refusal::bad_padding);

  const Compressor q{Kind::qsgd, 0, 2};  // 1 + 2 bits a value
  auto e = encode(q, v, 5);
  CHECK(refusal_of({Kind::qsgd, 0, 3}, e, v.size()) == Refusal::bad_level);
  auto level = e;
  level[13] |= 0x06;  // value 0's level field = 3 > 2
  CHECK(refusal_of(q, level, v.size()) == Refusal::bad_level);
}
