#include "sgp/gossip/half_float.hpp"

#include <bit>
#include <cmath>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "sgp/error.hpp"

namespace sgp::gossip {

// After F. Giesen's float_to_half_fast3_rtne (public domain): float32 bits in, binary16 out.
// Every case is computed and the right one selected, without branches, so that loops over it
// vectorise.
std::uint16_t float_to_fp16(float value) {
  constexpr std::uint32_t kInfinity = 255u << 23;
  constexpr std::uint32_t kLargest = 0x477fe000u;        // 65504, the largest finite binary16
  constexpr std::uint32_t kSubnormalLimit = 113u << 23;  // 2^-14: below it, a subnormal
  constexpr std::uint32_t kDenormMagic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t u = bits & 0x7fffffffu;
  // Normal: rebias the exponent, round the 13 dropped bits to nearest even.
  const std::uint32_t normal =
      (u + (static_cast<std::uint32_t>(15 - 127) << 23) + 0xfffu + ((u >> 13) & 1u)) >> 13;
  // Subnormal: the float adder rounds the mantissa into place (round to nearest even).
  const std::uint32_t subnormal =
      std::bit_cast<std::uint32_t>(std::bit_cast<float>(u) + std::bit_cast<float>(kDenormMagic)) -
      kDenormMagic;
  std::uint32_t out = u < kSubnormalLimit ? subnormal : normal;
  out = u > kLargest ? 0x7bffu : out;                                // saturate
  out = u >= kInfinity ? (u > kInfinity ? 0x7e00u : 0x7c00u) : out;  // NaN, infinity: rejected
  return static_cast<std::uint16_t>(out | ((bits >> 16) & 0x8000u));
}

float fp16_to_float(std::uint16_t bits) {
  constexpr std::uint32_t kShiftedExponent = 0x7c00u << 13;
  constexpr float kMagic = std::bit_cast<float>(113u << 23);
  std::uint32_t out = (bits & 0x7fffu) << 13;
  const std::uint32_t exponent = kShiftedExponent & out;
  out += (127u - 15u) << 23;
  if (exponent == kShiftedExponent) {
    out += (128u - 16u) << 23;  // infinity or NaN
  } else if (exponent == 0) {
    out += 1u << 23;  // zero or subnormal: renormalise
    out = std::bit_cast<std::uint32_t>(std::bit_cast<float>(out) - kMagic);
  }
  return std::bit_cast<float>(out | (static_cast<std::uint32_t>(bits & 0x8000u) << 16));
}

std::uint16_t float_to_bf16(float value) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(value);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);  // NaN
  // Round to nearest even; a value that rounds past the largest finite becomes infinite, which
  // the receiver rejects (only for |x| > 3.39e38).
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

float bf16_to_float(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

namespace {

template <std::uint16_t (*Compress)(float), float (*Decompress)(std::uint16_t)>
void keep_rest(float* x, std::size_t n, float pushed, std::uint16_t* out) {
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint16_t c = Compress(x[i]);
    out[i] = c;
    x[i] -= pushed * Decompress(c);
  }
}

template <float (*Decompress)(std::uint16_t)>
void add_scaled(std::span<const std::byte> payload, float coefficient, float* y) {
  const std::size_t n = payload.size() / 2;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint16_t c;
    std::memcpy(&c, payload.data() + 2 * i, 2);
    y[i] += coefficient * Decompress(c);
  }
}

#if defined(__x86_64__)
// x86 with F16C (every x86 CPU since 2012): 8 conversions per instruction, rounding to nearest
// even like float_to_fp16. Finite values beyond 65504 are clamped first (F16C would make them
// infinite); NaN and infinity pass unchanged. The arithmetic is the portable loop's (multiply,
// then subtract or add; no FMA), so both give the same bits except for NaN payloads.
// (cpuid rather than __builtin_cpu_supports("f16c"), which clang 14 does not know: the clang
// build for fuzzing failed to compile.)
bool has_f16c() {
  static const bool yes = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
    if (!(ecx & bit_AVX) || !(ecx & bit_F16C) || !(ecx & bit_OSXSAVE)) return false;
    unsigned xcr0 = 0, high = 0;  // the OS saves the AVX registers: XCR0 bits 1 and 2
    __asm__("xgetbv" : "=a"(xcr0), "=d"(high) : "c"(0));
    return (xcr0 & 6u) == 6u;
  }();
  return yes;
}

__attribute__((target("avx,f16c"))) void keep_rest_f16c(float* x, std::size_t n, float pushed,
                                                        std::uint16_t* out) {
  const __m256 largest = _mm256_set1_ps(65504.0f);
  const __m256 infinity = _mm256_set1_ps(INFINITY);
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  const __m256 coefficient = _mm256_set1_ps(pushed);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 magnitude = _mm256_andnot_ps(sign_bit, v);
    const __m256 too_big = _mm256_and_ps(_mm256_cmp_ps(magnitude, largest, _CMP_GT_OQ),
                                         _mm256_cmp_ps(magnitude, infinity, _CMP_LT_OQ));
    const __m256 saturated = _mm256_or_ps(_mm256_and_ps(sign_bit, v), largest);
    const __m128i h =
        _mm256_cvtps_ph(_mm256_blendv_ps(v, saturated, too_big), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
    _mm256_storeu_ps(x + i, _mm256_sub_ps(v, _mm256_mul_ps(coefficient, _mm256_cvtph_ps(h))));
  }
  keep_rest<float_to_fp16, fp16_to_float>(x + i, n - i, pushed, out + i);
}

__attribute__((target("avx,f16c"))) void add_scaled_f16c(std::span<const std::byte> payload,
                                                         float coefficient, float* y) {
  const std::size_t n = payload.size() / 2;
  const __m256 c = _mm256_set1_ps(coefficient);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(payload.data() + 2 * i));
    _mm256_storeu_ps(y + i,
                     _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_mul_ps(c, _mm256_cvtph_ps(h))));
  }
  add_scaled<fp16_to_float>(payload.subspan(2 * i), coefficient, y + i);
}
#else
bool has_f16c() { return false; }
void keep_rest_f16c(float*, std::size_t, float, std::uint16_t*) {}
void add_scaled_f16c(std::span<const std::byte>, float, float*) {}
#endif

}  // namespace

bool fp16_hardware_conversion() { return has_f16c(); }

void compress_and_keep(Compression compression, float* x, std::size_t n, float pushed,
                       std::uint16_t* out) {
  switch (compression) {
    case Compression::fp16:
      if (has_f16c()) return keep_rest_f16c(x, n, pushed, out);
      return keep_rest<float_to_fp16, fp16_to_float>(x, n, pushed, out);
    case Compression::bf16:
      return keep_rest<float_to_bf16, bf16_to_float>(x, n, pushed, out);
    case Compression::none:
      break;
  }
  SGP_ENFORCE(false, "compress_and_keep without a 16-bit compression");
}

void add_decompressed(Compression compression, std::span<const std::byte> payload,
                      float coefficient, float* y) {
  switch (compression) {
    case Compression::fp16:
      if (has_f16c()) return add_scaled_f16c(payload, coefficient, y);
      return add_scaled<fp16_to_float>(payload, coefficient, y);
    case Compression::bf16:
      return add_scaled<bf16_to_float>(payload, coefficient, y);
    case Compression::none:
      break;
  }
  SGP_ENFORCE(false, "add_decompressed without a 16-bit compression");
}

}  // namespace sgp::gossip
