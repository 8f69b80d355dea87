// Benchmark (figures only, no assertions): what each compressor costs the CPU per gossip round,
// next to the floor measured in the same run. For a vector of n floats (default W1's 669,706):
//   memcpy, axpy       one copy / one y += a x of the vector (what mixing an uncompressed
//                      message costs at least);
//   encode             compress::encode;
//   encode+feedback    compress::encode_with_feedback (what a sender does each round: encode,
//                      decode into the residual);
//   decode_add         compress::decode_add into a float vector (what a receiver does per
//                      in-neighbour and the sender for its own copy).
// Usage: bench_compress [n=669706] [reps=20]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "bench_median.hpp"
#include "sgp/compress/compressor.hpp"

namespace {

template <typename F>
double median_ms(int reps, F&& run) {
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    run();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  return sgp::bench::median(ms);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace sgp::compress;
  const std::size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 669706;
  const int reps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 20;
  std::vector<float> v(n), target(n, 0.0f), copy(n), residual(n, 0.0f);
  std::mt19937 random(1);
  std::normal_distribution<float> normal;
  for (float& x : v) x = normal(random);
  const double copy_ms = median_ms(reps, [&] { std::memcpy(copy.data(), v.data(), 4 * n); });
  const double axpy_ms = median_ms(reps, [&] {
    for (std::size_t k = 0; k < n; ++k) target[k] += 0.5f * v[k];
  });
  std::printf("n = %zu floats, median of %d: memcpy %.3f ms, axpy %.3f ms\n", n, reps, copy_ms,
              axpy_ms);
  std::printf("%-10s %10s %12s %17s %12s %9s\n", "compress", "bytes", "encode ms",
              "encode+feedback", "decode_add", "x axpy");
  for (const char* spec : {"sign", "topk:0.01", "topk:0.02", "randk:0.01", "qsgd:4"}) {
    const Compressor c = parse_compressor(spec, "--compress");
    std::vector<std::uint8_t> payload;
    const double encode_ms = median_ms(reps, [&] { payload = encode(c, v, 7); });
    const double feedback_ms = median_ms(reps, [&] { encode_with_feedback(c, v, residual, 7); });
    const double decode_ms = median_ms(reps, [&] { decode_add<float>(c, payload, target, 0.5); });
    std::printf("%-10s %10zu %12.3f %17.3f %12.3f %9.1f\n", spec, payload.size(), encode_ms,
                feedback_ms, decode_ms, decode_ms / axpy_ms);
  }
  return 0;
}
