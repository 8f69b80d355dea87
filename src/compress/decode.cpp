// Decoding: every field is checked before anything is added to the target.
#include <algorithm>
#include <bit>
#include <cmath>

#include "payload_bytes.hpp"
#include "sgp/compress/compressor.hpp"

namespace sgp::compress {
namespace {

using detail::BitReader;
using detail::ByteReader;
using detail::refuse;

const char* kind_name(std::uint8_t kind) {
  switch (kind) {
    case 1:
      return "topk";
    case 2:
      return "randk";
    case 3:
      return "sign";
    case 4:
      return "qsgd";
    default:
      return "unknown";
  }
}

void read_header(ByteReader& in, const Compressor& c, std::size_t n) {
  const auto kind = in.get<std::uint8_t>();
  if (kind != static_cast<std::uint8_t>(c.kind)) {
    refuse(Refusal::wrong_kind, fmt::format("kind {} ({}), expected {}", kind, kind_name(kind),
                                            kind_name(static_cast<std::uint8_t>(c.kind))));
  }
  const auto length = in.get<std::uint32_t>();
  if (length != n) {
    refuse(Refusal::wrong_length, fmt::format("a vector of {} values, expected {}", length, n));
  }
}

std::vector<float> read_values(ByteReader& in, std::size_t k) {
  std::vector<float> values(k);
  for (float& v : values) {
    v = in.get<float>();
    if (!std::isfinite(v)) refuse(Refusal::not_finite, "a value is not finite");
  }
  return values;
}

std::uint32_t read_count(ByteReader& in, const Compressor& c, std::size_t n) {
  const auto k = in.get<std::uint32_t>();
  if (k != coordinates_sent(c, n)) {
    refuse(Refusal::bad_count, fmt::format("{} coordinates, expected {} ({} of {})", k,
                                           coordinates_sent(c, n), compressor_name(c), n));
  }
  return k;
}

std::vector<std::uint32_t> read_gaps(ByteReader& in, std::size_t k, std::size_t n) {
  std::vector<std::uint32_t> index(k);
  std::uint64_t next = 0;  // the smallest index the next gap can give
  for (std::size_t j = 0; j < k; ++j) {
    const std::uint64_t i = next + in.varint();
    if (i >= n) refuse(Refusal::bad_index, fmt::format("index {} of a {}-vector", i, n));
    index[j] = static_cast<std::uint32_t>(i);
    next = i + 1;
  }
  return index;
}

// Each decoder checks everything first; an empty target (check_payload) stops there.
template <typename T>
void decode_sparse(const Compressor& c, ByteReader& in, std::size_t n, std::span<T> target,
                   double scale) {
  const std::uint32_t k = read_count(in, c, n);
  const std::uint64_t seed = c.kind == Kind::randk ? in.get<std::uint64_t>() : 0;
  const auto values = read_values(in, k);
  // randk's indices are valid by construction: a check need not draw them.
  const auto index = c.kind == Kind::topk ? read_gaps(in, k, n)
                     : target.empty()     ? std::vector<std::uint32_t>{}
                                          : detail::random_indices(seed, n, k);
  in.finish();
  if (target.empty()) return;
  for (std::size_t j = 0; j < k; ++j) target[index[j]] += static_cast<T>(scale * values[j]);
}

float read_scale(ByteReader& in, const char* what) {
  const auto scale = in.get<float>();
  if (!std::isfinite(scale) || scale < 0.0f) {
    refuse(Refusal::bad_scale, fmt::format("{} {} (expected finite and >= 0)", what, scale));
  }
  return scale;
}

template <typename T>
void decode_sign(ByteReader& in, std::size_t n, std::span<T> target, double scale) {
  const float magnitude = read_scale(in, "scale");
  const auto bits = in.take(detail::packed_bytes(n, 1));
  in.finish();
  // Every bit is a valid sign: only the last byte's bits past value n - 1 can be wrong.
  if (n % 8 != 0 && (bits.back() >> (n % 8)) != 0) {
    refuse(Refusal::bad_padding, "sign bits past the last value");
  }
  if (target.empty()) return;
  // Every coordinate adds one of two values (rounded as decode_add promises: in double, then
  // to T); a byte at a time so that the compiler can vectorise the 8 additions (a bit reader
  // per value made a W1 sign payload take 17 times an axpy to apply).
  const T plus = static_cast<T>(scale * magnitude);
  const T minus = static_cast<T>(scale * -magnitude);
  const std::size_t whole = n / 8;
  for (std::size_t b = 0; b < whole; ++b) {
    T* out = target.data() + 8 * b;
    const unsigned byte = bits[b];
    for (unsigned j = 0; j < 8; ++j) out[j] += (byte >> j) & 1u ? minus : plus;
  }
  for (std::size_t k = 8 * whole; k < n; ++k)
    target[k] += (bits[k / 8] >> (k % 8)) & 1u ? minus : plus;
}

template <typename T>
void decode_qsgd(const Compressor& c, ByteReader& in, std::size_t n, std::span<T> target,
                 double scale) {
  const auto levels = in.get<std::uint32_t>();
  if (levels != c.levels) {
    refuse(Refusal::bad_level, fmt::format("{} levels, expected {}", levels, c.levels));
  }
  const float norm = read_scale(in, "norm");
  const int width = std::bit_width(levels);
  const auto bits = in.take(detail::packed_bytes(n, 1 + width));
  in.finish();
  BitReader check(bits);
  for (std::size_t k = 0; k < n; ++k) {
    check.get(1);
    const std::uint32_t level = check.get(width);
    if (level > levels) {
      refuse(Refusal::bad_level, fmt::format("level {} above {} at value {}", level, levels, k));
    }
  }
  if (!check.padding_is_zero()) refuse(Refusal::bad_padding, "bits past the last value");
  if (target.empty()) return;
  BitReader fields(bits);
  for (std::size_t k = 0; k < target.size(); ++k) {
    const bool negative = fields.get(1) != 0;
    target[k] +=
        static_cast<T>(scale * detail::qsgd_value(norm, fields.get(width), levels, negative));
  }
}

// The payload of an n-vector checked, then added to target unless target is empty.
template <typename T>
void decode_checked(const Compressor& c, std::span<const std::uint8_t> payload, std::size_t n,
                    std::span<T> target, double scale) {
  ByteReader in(payload);
  read_header(in, c, n);
  switch (c.kind) {
    case Kind::topk:
    case Kind::randk:
      return decode_sparse(c, in, n, target, scale);
    case Kind::sign:
      return decode_sign(in, n, target, scale);
    case Kind::qsgd:
      return decode_qsgd(c, in, n, target, scale);
  }
  SGP_ENFORCE(false, "unknown compressor kind {}", static_cast<int>(c.kind));
}

}  // namespace

template <typename T>
void decode_add(const Compressor& c, std::span<const std::uint8_t> payload, std::span<T> target,
                double scale) {
  SGP_ENFORCE(!target.empty(), "decoding into an empty vector");
  decode_checked(c, payload, target.size(), target, scale);
}

void check_payload(const Compressor& c, std::span<const std::uint8_t> payload, std::size_t n) {
  SGP_ENFORCE(n > 0, "checking a payload for an empty vector");
  decode_checked(c, payload, n, std::span<float>{}, 1.0);
}

template void decode_add<float>(const Compressor&, std::span<const std::uint8_t>, std::span<float>,
                                double);
template void decode_add<double>(const Compressor&, std::span<const std::uint8_t>,
                                 std::span<double>, double);

std::vector<std::uint8_t> encode_with_feedback(const Compressor& c, std::span<const float> v,
                                               std::span<float> residual, std::uint64_t seed) {
  SGP_ENFORCE(residual.size() == v.size(), "residual of {} values for {}", residual.size(),
              v.size());
  std::vector<float> meant(v.size());
  for (std::size_t k = 0; k < v.size(); ++k) meant[k] = v[k] + residual[k];
  auto payload = encode(c, meant, seed);
  std::vector<float> sent(v.size(), 0.0f);
  decode_add(c, std::span<const std::uint8_t>(payload), std::span<float>(sent));
  for (std::size_t k = 0; k < v.size(); ++k) residual[k] = meant[k] - sent[k];
  return payload;
}

}  // namespace sgp::compress
