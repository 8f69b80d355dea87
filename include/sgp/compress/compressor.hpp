#pragma once
// Compressors for gossip payloads, with error feedback (issue 37): pure functions over spans, no
// transport or simulation state, so the gossip engine and `sgp simulate` encode and decode the
// same bytes.
//   topk:R   the ceil(R n) coordinates of largest magnitude (ties: the lower index), their
//            indices as LEB128 varints of the gaps between them (about 1 byte each at R = 1%)
//   randk:R  ceil(R n) coordinates drawn without replacement from a 64-bit seed that travels in
//            the payload (8 bytes instead of k indices; the receiver regenerates them, so no
//            seed has to be agreed beforehand and every index is valid by construction)
//   sign     ||v||_1 / n times sign(v): one bit per coordinate and a float32 scale
//   qsgd:L   Alistarh et al.'s QSGD with L levels: ||v||_2 times sign(v_k) l_k / L, l_k in
//            0..L rounded at random (unbiased) from a seed: 1 + bit_width(L) bits a coordinate
// Payload (little-endian): u8 kind (1 topk, 2 randk, 3 sign, 4 qsgd), u32 n (the vector's
// length), then
//   topk:  u32 k, k float32 values, k varint index gaps (first index, then index - previous - 1)
//   randk: u32 k, u64 index seed, k float32 values (ascending index order)
//   sign:  float32 scale, ceil(n / 8) bytes of sign bits (1 = negative, LSB first, padding 0)
//   qsgd:  u32 L, float32 norm, n fields of (sign bit, level in bit_width(L) bits), LSB first
// A decoder refuses, before it writes anything, a payload of another kind or length, a count,
// index, level or scale out of range, a value that is not finite, or bytes missing or left over
// (PayloadError: the reason, to count; never applied).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sgp/error.hpp"

namespace sgp::compress {

enum class Kind : std::uint8_t { topk = 1, randk = 2, sign = 3, qsgd = 4 };

struct Compressor {
  Kind kind = Kind::topk;
  double ratio = 0.01;       // topk, randk: the fraction of the coordinates sent, in (0, 1]
  std::uint32_t levels = 0;  // qsgd: L, 1 .. kMaxLevels
  friend bool operator==(const Compressor&, const Compressor&) = default;
};

inline constexpr std::uint32_t kMaxLevels = 32767;

// "topk:R" | "randk:R" (0 < R <= 1) | "sign" | "qsgd:L" (1 <= L <= 32767); InputError naming
// `flag` and what was expected otherwise.
Compressor parse_compressor(std::string_view text, std::string_view flag);
// The text parse_compressor reads back ("topk:0.01").
std::string compressor_name(const Compressor& c);

// topk, randk: how many coordinates of an n-vector are sent: ceil(R n), at least 1, at most n.
std::size_t coordinates_sent(const Compressor& c, std::size_t n);

// The largest payload encode() can make for an n-vector (topk: every index gap as a 5-byte
// varint), for receive limits.
std::size_t max_payload_bytes(const Compressor& c, std::size_t n);

// The payload of v (n = v.size() < 2^32, every value finite, and for qsgd ||v||_2 within
// float32: InvariantError otherwise). `seed`
// draws randk's indices and qsgd's rounding (the sender's: e.g. from the run seed, its rank and
// the round); topk and sign ignore it.
std::vector<std::uint8_t> encode(const Compressor& c, std::span<const float> v, std::uint64_t seed);

enum class Refusal : std::uint8_t {
  wrong_kind,      // another compressor's payload
  wrong_length,    // n is not the receiver's vector length
  truncated,       // bytes missing
  trailing_bytes,  // bytes left over
  bad_count,       // k is not ceil(R n) of the receiver's R
  bad_index,       // topk: an index past n, or a varint too long
  bad_level,       // qsgd: L is not the receiver's, or a level above L
  bad_scale,       // sign, qsgd: the scale or norm is negative or not finite
  not_finite,      // a value is not finite
  bad_padding,     // unused bits are not zero
};
const char* refusal_name(Refusal r);

class PayloadError : public IoError {
 public:
  PayloadError(Refusal reason, const std::string& what) : IoError(what), reason_(reason) {}
  Refusal reason() const { return reason_; }

 private:
  Refusal reason_;
};

// Checks every field of `payload` against the receiver's compressor and target.size(), then
// adds `scale` times the decoded vector to `target` (each value scaled in double, then rounded
// to T); PayloadError (target untouched) when anything is wrong. Float and double targets.
template <typename T>
void decode_add(const Compressor& c, std::span<const std::uint8_t> payload, std::span<T> target,
                double scale = 1.0);

// decode_add's checks alone, for a vector of n values: PayloadError when decode_add would refuse
// `payload`, nothing otherwise (a receiver checks before it accepts what it applies later).
void check_payload(const Compressor& c, std::span<const std::uint8_t> payload, std::size_t n);

// Error feedback: encodes meant = v + residual (float32) and leaves in `residual` what was not
// sent, meant - decode(payload). topk and randk send a coordinate whole or not at all, so
// residual + sent == meant bit for bit; sign and qsgd round meant - sent to float32 once.
std::vector<std::uint8_t> encode_with_feedback(const Compressor& c, std::span<const float> v,
                                               std::span<float> residual, std::uint64_t seed);

// CHOCO-style gossip (public copies updated by compressed differences; docs/compression.md):
// what decode(q) is multiplied by before it is added to a copy: 1, and for qsgd (unbiased,
// variance omega ||v||^2 with omega = min(n / L^2, sqrt(n) / L), Alistarh et al.) 1 / (1 +
// omega), which makes it contract as error feedback needs (CHOCO's scaling).
double copy_scale(const Compressor& c, std::size_t dim);

// The consensus step gamma when none is given: R for topk and randk (their contraction
// ||v - C(v)||^2 <= (1 - R) ||v||^2), 1 / (1 + omega) for qsgd (the same for its scaled form),
// and 0.005 for sign (what converged on a directed ring, docs/simulation.md).
double default_consensus_step(const Compressor& c, std::size_t dim);

}  // namespace sgp::compress
