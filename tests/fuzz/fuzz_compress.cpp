// Fuzz target: the compressed-payload decoders (sgp/compress/compressor.hpp). Byte 0 picks the
// receiver's compressor (kind = b % 4; topk/randk R = (b / 4 + 1) / 64, qsgd L = b / 4 + 1),
// bytes 1-2 its vector length (1 .. 4096), the rest is the payload. A refusal must leave the
// target untouched; an accepted payload must have added only finite values.
#include <cmath>
#include <vector>

#include "fuzz_target.hpp"
#include "sgp/compress/compressor.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return sgp::fuzz::run_target(data, size, [](std::span<const std::uint8_t> bytes) {
    if (bytes.size() < 3) return;
    using sgp::compress::Kind;
    const std::uint8_t pick = bytes[0];
    sgp::compress::Compressor c;
    c.kind = static_cast<Kind>(pick % 4 + 1);
    c.ratio = (pick / 4 + 1) / 64.0;
    c.levels = pick / 4 + 1u;
    const std::size_t n = (bytes[1] | (bytes[2] << 8)) % 4096 + 1;
    std::vector<float> target(n, 0.0f);
    try {
      sgp::compress::decode_add(c, bytes.subspan(3), std::span<float>(target));
    } catch (const sgp::compress::PayloadError&) {
      for (float t : target) {
        if (t != 0.0f) __builtin_trap();  // a refused payload was applied in part
      }
      throw;
    }
    for (float t : target) {
      if (!std::isfinite(t)) __builtin_trap();
    }
  });
}
