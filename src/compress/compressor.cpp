#include "sgp/compress/compressor.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <numeric>

#include "payload_bytes.hpp"
#include "sgp/data/seeded_random.hpp"

namespace sgp::compress {
namespace detail {

void refuse(Refusal reason, const std::string& what) {
  throw PayloadError(
      reason, fmt::format("compressed payload refused ({}): {}", refusal_name(reason), what));
}

// Uniform in [0, 1) from the SplitMix64 stream of `seed` at position i: the same numbers at
// both ends of a link, whatever their standard library.
double uniform_at(std::uint64_t seed, std::uint64_t i) {
  return static_cast<double>(data::splitmix64(seed + i * 0x9e3779b97f4a7c15ull) >> 11) * 0x1.0p-53;
}

// Selection sampling (Knuth's Algorithm S): exactly k of 0..n-1, ascending, from the seed alone.
std::vector<std::uint32_t> random_indices(std::uint64_t seed, std::size_t n, std::size_t k) {
  std::vector<std::uint32_t> chosen;
  chosen.reserve(k);
  for (std::size_t i = 0; i < n && chosen.size() < k; ++i) {
    const auto left = static_cast<double>(n - i);
    if (left * uniform_at(seed, i) < static_cast<double>(k - chosen.size())) {
      chosen.push_back(static_cast<std::uint32_t>(i));
    }
  }
  return chosen;
}

float qsgd_value(float norm, std::uint32_t level, std::uint32_t levels, bool negative) {
  const auto magnitude = static_cast<float>(static_cast<double>(norm) * level / levels);
  return negative ? -magnitude : magnitude;
}

}  // namespace detail

namespace {

using detail::BitWriter;
using detail::ByteWriter;
using detail::random_indices;
using detail::uniform_at;

constexpr std::size_t kHeaderBytes = 5;  // kind, n

// The k coordinates of largest magnitude (ties: the lower index), ascending.
std::vector<std::uint32_t> top_indices(std::span<const float> v, std::size_t k) {
  std::vector<std::uint32_t> index(v.size());
  std::iota(index.begin(), index.end(), 0u);
  const auto larger = [&](std::uint32_t a, std::uint32_t b) {
    const float fa = std::fabs(v[a]), fb = std::fabs(v[b]);
    return fa > fb || (fa == fb && a < b);
  };
  if (k < index.size()) {
    std::nth_element(index.begin(), index.begin() + static_cast<std::ptrdiff_t>(k), index.end(),
                     larger);
  }
  index.resize(k);
  std::sort(index.begin(), index.end());
  return index;
}

int level_bits(std::uint32_t levels) { return std::bit_width(levels); }

std::vector<std::uint8_t> encode_sparse(const Compressor& c, std::span<const float> v,
                                        std::uint64_t seed, ByteWriter out) {
  const std::size_t k = coordinates_sent(c, v.size());
  const auto index = c.kind == Kind::topk ? top_indices(v, k) : random_indices(seed, v.size(), k);
  out.put(static_cast<std::uint32_t>(k));
  if (c.kind == Kind::randk) out.put(seed);
  for (std::uint32_t i : index) out.put(v[i]);
  if (c.kind == Kind::topk) {
    for (std::size_t j = 0; j < k; ++j) out.varint(j == 0 ? index[0] : index[j] - index[j - 1] - 1);
  }
  return std::move(out.bytes());
}

std::vector<std::uint8_t> encode_sign(std::span<const float> v, ByteWriter out) {
  double l1 = 0.0;
  for (float x : v) l1 += std::fabs(static_cast<double>(x));
  out.put(static_cast<float>(l1 / static_cast<double>(v.size())));
  // Sign bits LSB first, as BitWriter packs them, written a byte at a time.
  auto& bytes = out.bytes();
  const std::size_t start = bytes.size();
  bytes.resize(start + detail::packed_bytes(v.size(), 1), 0);
  std::uint8_t* packed = bytes.data() + start;
  const std::size_t whole = v.size() / 8;
  for (std::size_t b = 0; b < whole; ++b) {
    unsigned byte = 0;
    for (unsigned j = 0; j < 8; ++j) byte |= (v[8 * b + j] < 0.0f ? 1u : 0u) << j;
    packed[b] = static_cast<std::uint8_t>(byte);
  }
  for (std::size_t k = 8 * whole; k < v.size(); ++k) {
    packed[k / 8] |= static_cast<std::uint8_t>((v[k] < 0.0f ? 1u : 0u) << (k % 8));
  }
  return std::move(out.bytes());
}

std::vector<std::uint8_t> encode_qsgd(const Compressor& c, std::span<const float> v,
                                      std::uint64_t seed, ByteWriter out) {
  double sum2 = 0.0;
  for (float x : v) sum2 += static_cast<double>(x) * x;
  const auto norm = static_cast<float>(std::sqrt(sum2));
  SGP_ENFORCE(std::isfinite(norm), "qsgd: the norm {} of the vector exceeds float32",
              std::sqrt(sum2));
  out.put(c.levels);
  out.put(norm);
  const int width = level_bits(c.levels);
  BitWriter bits(out.bytes());
  for (std::size_t k = 0; k < v.size(); ++k) {
    std::uint32_t level = 0;
    if (norm > 0.0f) {
      const double scaled = std::fabs(static_cast<double>(v[k])) / norm * c.levels;
      const double floor = std::floor(scaled);
      level = static_cast<std::uint32_t>(floor) + (uniform_at(seed, k) < scaled - floor ? 1 : 0);
      level = std::min(level, c.levels);  // |v_k| may exceed the float32-rounded norm
    }
    bits.put(v[k] < 0.0f ? 1 : 0, 1);
    bits.put(level, width);
  }
  bits.flush();
  return std::move(out.bytes());
}

}  // namespace

const char* refusal_name(Refusal r) {
  switch (r) {
    case Refusal::wrong_kind:
      return "wrong_kind";
    case Refusal::wrong_length:
      return "wrong_length";
    case Refusal::truncated:
      return "truncated";
    case Refusal::trailing_bytes:
      return "trailing_bytes";
    case Refusal::bad_count:
      return "bad_count";
    case Refusal::bad_index:
      return "bad_index";
    case Refusal::bad_level:
      return "bad_level";
    case Refusal::bad_scale:
      return "bad_scale";
    case Refusal::not_finite:
      return "not_finite";
    case Refusal::bad_padding:
      return "bad_padding";
  }
  return "unknown";
}

std::size_t coordinates_sent(const Compressor& c, std::size_t n) {
  const auto k = static_cast<std::size_t>(std::ceil(c.ratio * static_cast<double>(n)));
  return std::clamp<std::size_t>(k, 1, n);
}

std::size_t max_payload_bytes(const Compressor& c, std::size_t n) {
  switch (c.kind) {
    case Kind::topk:
      return kHeaderBytes + 4 + coordinates_sent(c, n) * (sizeof(float) + 5);
    case Kind::randk:
      return kHeaderBytes + 4 + 8 + coordinates_sent(c, n) * sizeof(float);
    case Kind::sign:
      return kHeaderBytes + sizeof(float) + detail::packed_bytes(n, 1);
    case Kind::qsgd:
      return kHeaderBytes + 4 + sizeof(float) + detail::packed_bytes(n, 1 + level_bits(c.levels));
  }
  SGP_ENFORCE(false, "unknown compressor kind {}", static_cast<int>(c.kind));
}

std::vector<std::uint8_t> encode(const Compressor& c, std::span<const float> v,
                                 std::uint64_t seed) {
  SGP_ENFORCE(!v.empty() && v.size() <= UINT32_MAX, "cannot compress {} values", v.size());
  SGP_ENFORCE(std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); }),
              "compressing a vector that is not finite");
  ByteWriter out(kHeaderBytes + 16 + v.size() / 4);
  out.put(static_cast<std::uint8_t>(c.kind));
  out.put(static_cast<std::uint32_t>(v.size()));
  switch (c.kind) {
    case Kind::topk:
    case Kind::randk:
      return encode_sparse(c, v, seed, std::move(out));
    case Kind::sign:
      return encode_sign(v, std::move(out));
    case Kind::qsgd:
      return encode_qsgd(c, v, seed, std::move(out));
  }
  SGP_ENFORCE(false, "unknown compressor kind {}", static_cast<int>(c.kind));
}

}  // namespace sgp::compress
