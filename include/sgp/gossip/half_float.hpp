#pragma once
// 16-bit floats for compressed gossip (--compress fp16 | bf16, wire dtypes 4 and 5): round to
// nearest even, in plain integer arithmetic the compiler vectorises (no F16C needed).
//   fp16: IEEE binary16. Values beyond its largest finite value (65504) saturate to +-65504, so
//         a large finite parameter is clipped (the sender keeps the rest) instead of becoming
//         infinite; NaN and infinity stay what they are (the receiver rejects them); magnitudes
//         below 2^-25 round to zero.
//   bf16: the top 16 bits of float32 (float32's range, 8 significant bits), rounded.
#include <cstddef>
#include <cstdint>
#include <span>

#include "sgp/gossip/push_sum_config.hpp"

namespace sgp::gossip {

std::uint16_t float_to_fp16(float value);
float fp16_to_float(std::uint16_t bits);
std::uint16_t float_to_bf16(float value);
float bf16_to_float(std::uint16_t bits);

// Whether compress_and_keep and add_decompressed convert fp16 with the CPU's F16C instructions
// (the same results as the functions above; otherwise they use them).
bool fp16_hardware_conversion();

// The push-sum sender's pass over one chunk (compression fp16 or bf16): out[i] = compress(x[i])
// and x[i] -= pushed * decompress(out[i]), i.e. x keeps exactly what the receivers, whose
// coefficients sum to `pushed`, do not get.
void compress_and_keep(Compression compression, float* x, std::size_t n, float pushed,
                       std::uint16_t* out);

// The receiver's pass: y[i] += coefficient * decompress(payload element i); payload: 16-bit
// values at any alignment, as many as y has.
void add_decompressed(Compression compression, std::span<const std::byte> payload,
                      float coefficient, float* y);

}  // namespace sgp::gossip
