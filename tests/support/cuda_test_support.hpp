#pragma once
// Shared by the CUDA tests (test_cuda_backend.cpp, test_cuda_layers.cpp): whether a GPU is
// usable, both backends side by side, and comparisons with tolerances scaled to magnitude.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "sgp/compute/cpu_backend.hpp"
#include "sgp/compute/cuda_backend.hpp"
#include "sgp/compute/device.hpp"
#include "sgp/compute/device_buffer.hpp"
#include "sgp/error.hpp"

namespace sgp::cuda_test {

using namespace sgp::compute;

struct GpuStatus {
  int count = 0;
  std::string why_not;
};

inline const GpuStatus& gpu_status() {
  static const GpuStatus status = [] {
    GpuStatus s;
    s.count = CudaBackend::usable_device_count(&s.why_not);
    return s;
  }();
  return status;
}

inline bool no_gpu() { return gpu_status().count == 0; }

// Both backends side by side.
struct Backends {
  CpuBackend cpu;
  CudaBackend gpu{0, false};
};

inline std::vector<float> random_vector(std::size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Host values on the GPU at element `offset` of a buffer: offset 1 breaks the 16-byte alignment
// of cudaMalloc and sends the kernels down their scalar path.
template <class T>
class OnGpu {
 public:
  OnGpu(Backend& gpu, const std::vector<T>& host, std::size_t offset = 0)
      : buffer_(gpu, host.size() + offset), offset_(offset) {
    buffer_.upload(std::span<const T>(host), offset);
  }
  T* data() { return buffer_.data() + offset_; }
  std::vector<T> to_host() const {
    const std::vector<T> all = buffer_.to_host();
    return std::vector<T>(all.begin() + static_cast<std::ptrdiff_t>(offset_), all.end());
  }

 private:
  DeviceBuffer<T> buffer_;
  std::size_t offset_;
};

inline double rms(const std::vector<float>& v) {
  double sum = 0.0;
  for (float x : v) sum += static_cast<double>(x) * x;
  return v.empty() ? 0.0 : std::sqrt(sum / static_cast<double>(v.size()));
}

// Element i passes when |actual - expected| <= bound[i]. One assertion per call; the message
// names the count of failures and the worst element.
inline void check_within(const std::vector<float>& actual, const std::vector<float>& expected,
                         const std::vector<double>& bound, const std::string& what) {
  REQUIRE_MESSAGE(actual.size() == expected.size(), what);
  std::size_t failures = 0, worst = 0;
  double worst_ratio = 0.0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double err = std::fabs(static_cast<double>(actual[i]) - expected[i]);
    const double ratio = bound[i] > 0.0 ? err / bound[i] : (err > 0.0 ? INFINITY : 0.0);
    if (!(ratio <= 1.0)) ++failures;  // also catches NaN
    if (!(ratio <= worst_ratio)) {
      worst_ratio = ratio;
      worst = i;
    }
  }
  CHECK_MESSAGE(failures == 0, what << ": " << failures << " of " << actual.size()
                                    << " elements outside tolerance; worst [" << worst << "] "
                                    << (actual.empty() ? 0.0f : actual[worst]) << " vs "
                                    << (expected.empty() ? 0.0f : expected[worst]) << " (bound "
                                    << (bound.empty() ? 0.0 : bound[worst]) << ")");
}

// Tolerance that grows with the reference value: rel * (|expected[i]| + floor), where the floor
// (rel_floor * rms of the whole reference) keeps near-zero elements from demanding exactness.
inline void check_close(const std::vector<float>& actual, const std::vector<float>& expected,
                        double rel, const std::string& what, double rel_floor = 1.0) {
  const double floor = rel_floor * rms(expected);
  std::vector<double> bound(expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    bound[i] = rel * (std::fabs(static_cast<double>(expected[i])) + floor);
  }
  check_within(actual, expected, bound, what);
}

inline void check_equal(const std::vector<float>& actual, const std::vector<float>& expected,
                        const std::string& what) {
  check_within(actual, expected, std::vector<double>(expected.size(), 0.0), what);
}

}  // namespace sgp::cuda_test
