#pragma once
// Analytic gradients against central finite differences, for networks of float32 layers.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <vector>

#include <doctest/doctest.h>

namespace sgp::testing {

// Compares grads[i] with the central difference of loss_at(params) for every parameter of small
// models and a strided sample (about 300) of larger ones. A ReLU or max-pool kink inside
// [p - h, p + h] makes the difference meaningless there, so each parameter is differenced with
// steps h and h/2: where the two disagree a kink was crossed and that parameter is skipped (at
// most a tenth may be); elsewhere the analytic value must match to 1%.
// allowed_mismatches: the fraction of checked parameters that may still disagree (0 for small
// networks). A deep float32 network (LeNet) has more rounding noise in its loss and more max-pool
// kinks within h/2 of a parameter than the two steps can detect: there a few per cent are allowed,
// while the small networks check every layer strictly.
inline void check_against_finite_differences(
    std::vector<float>& params, const std::vector<float>& grads,
    const std::function<double(const std::vector<float>&)>& loss_at,
    double allowed_mismatches = 0.0) {
  const std::size_t stride = std::max<std::size_t>(1, params.size() / 300);
  auto central_difference = [&](std::size_t i, float h) {
    const float saved = params[i];
    params[i] = saved + h;
    const double plus = loss_at(params);
    params[i] = saved - h;
    const double minus = loss_at(params);
    params[i] = saved;
    return (plus - minus) / (2.0 * h);
  };
  auto relative = [](double a, double b) {
    // With a floor: float32 losses carry ~1e-7 relative noise, divided by the step.
    return std::abs(a - b) / std::max(1e-2, std::abs(a) + std::abs(b));
  };
  int checked = 0, skipped = 0, mismatches = 0;
  for (std::size_t i = 0; i < params.size(); i += stride) {
    const double coarse = central_difference(i, 4e-3f);
    const double fine = central_difference(i, 2e-3f);
    if (relative(coarse, fine) > 1e-2) {
      ++skipped;
      continue;
    }
    ++checked;
    if (relative(fine, grads[i]) < 1e-2) continue;
    ++mismatches;
    if (allowed_mismatches == 0.0) {
      FAIL_CHECK("parameter " << i << ": analytic " << grads[i] << " numeric " << fine);
    } else {
      MESSAGE("parameter " << i << ": analytic " << grads[i] << " numeric " << fine);
    }
  }
  CHECK(mismatches <= allowed_mismatches * checked);
  CHECK(skipped * 10 <= checked + skipped);
  CHECK(checked > 0);
}

}  // namespace sgp::testing
