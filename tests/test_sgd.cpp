#include <vector>

#include <doctest/doctest.h>

#include "sgp/compute/cpu_backend.hpp"
#include "sgp/error.hpp"
#include "sgp/model/lr_schedule.hpp"
#include "sgp/model/sgd.hpp"

using namespace sgp::model;
using sgp::compute::CpuBackend;

TEST_CASE("SGD steps match hand-computed values") {
  CpuBackend backend;
  // One parameter p = 1, gradient g = 0.5, lr 0.1.
  SUBCASE("plain") {
    Sgd sgd(backend, 1, {0.0f, 0.0f, false});
    std::vector<float> p = {1.0f};
    const std::vector<float> g = {0.5f};
    sgd.step(p.data(), g.data(), 0.1f);
    CHECK(p[0] == doctest::Approx(0.95));
  }
  SUBCASE("momentum 0.9: v1 = g, v2 = 0.9 v1 + g") {
    Sgd sgd(backend, 1, {0.9f, 0.0f, false});
    std::vector<float> p = {1.0f};
    const std::vector<float> g = {0.5f};
    sgd.step(p.data(), g.data(), 0.1f);  // v = 0.5, p = 0.95
    sgd.step(p.data(), g.data(), 0.1f);  // v = 0.95, p = 0.855
    CHECK(p[0] == doctest::Approx(0.855));
    CHECK(sgd.velocity().to_host()[0] == doctest::Approx(0.95));
  }
  SUBCASE("Nesterov: p -= lr (g + mu v)") {
    Sgd sgd(backend, 1, {0.9f, 0.0f, true});
    std::vector<float> p = {1.0f};
    const std::vector<float> g = {0.5f};
    sgd.step(p.data(), g.data(), 0.1f);  // v = 0.5; p = 1 - 0.1 (0.5 + 0.45) = 0.905
    CHECK(p[0] == doctest::Approx(0.905));
    sgd.step(p.data(), g.data(), 0.1f);  // v = 0.95; p = 0.905 - 0.1 (0.5 + 0.855) = 0.7695
    CHECK(p[0] == doctest::Approx(0.7695));
  }
  SUBCASE("weight decay adds wd * p to the gradient") {
    Sgd sgd(backend, 2, {0.0f, 0.1f, false});
    std::vector<float> p = {2.0f, -4.0f};
    const std::vector<float> g = {0.0f, 1.0f};
    sgd.step(p.data(), g.data(), 0.5f);  // g' = {0.2, 0.6}
    CHECK(p[0] == doctest::Approx(1.9));
    CHECK(p[1] == doctest::Approx(-4.3));
  }
  SUBCASE("Nesterov with weight decay (the default configuration): g' = g + wd p") {
    Sgd sgd(backend, 2, {0.9f, 0.1f, true});
    std::vector<float> p = {2.0f, -4.0f};
    const std::vector<float> g = {0.5f, 1.0f};
    // g' = {0.7, 0.6}; v = g'; p -= 0.5 (g' + 0.9 v) = {1.335, -4.57}
    sgd.step(p.data(), g.data(), 0.5f);
    CHECK(p[0] == doctest::Approx(1.335).epsilon(1e-6));
    CHECK(p[1] == doctest::Approx(-4.57).epsilon(1e-6));
    // g' = {0.6335, 0.543}; v = 0.9 v + g' = {1.2635, 1.083}; p -= 0.5 (g' + 0.9 v)
    sgd.step(p.data(), g.data(), 0.5f);
    CHECK(p[0] == doctest::Approx(0.449675).epsilon(1e-6));
    CHECK(p[1] == doctest::Approx(-5.32885).epsilon(1e-6));
    const auto v = sgd.velocity().to_host();
    CHECK(v[0] == doctest::Approx(1.2635).epsilon(1e-6));
    CHECK(v[1] == doctest::Approx(1.083).epsilon(1e-6));
  }
}

TEST_CASE("learning-rate schedules") {
  SUBCASE("linear warm-up then constant") {
    LrSchedule s(
        {.base_lr = 0.4, .warmup_iterations = 4, .decay = LrDecay::constant, .milestones = {}});
    CHECK(s.at(0) == doctest::Approx(0.1));
    CHECK(s.at(1) == doctest::Approx(0.2));
    CHECK(s.at(3) == doctest::Approx(0.4));
    CHECK(s.at(100) == doctest::Approx(0.4));
  }
  SUBCASE("step decay at milestones") {
    LrSchedule s({.base_lr = 1.0, .decay = LrDecay::step, .milestones = {10, 20}, .gamma = 0.5});
    CHECK(s.at(9) == doctest::Approx(1.0));
    CHECK(s.at(10) == doctest::Approx(0.5));
    CHECK(s.at(25) == doctest::Approx(0.25));
  }
  SUBCASE("cosine after warm-up") {
    LrSchedule s({.base_lr = 1.0,
                  .warmup_iterations = 10,
                  .decay = LrDecay::cosine,
                  .milestones = {},
                  .total_iterations = 110});
    CHECK(s.at(10) == doctest::Approx(1.0));
    CHECK(s.at(60) == doctest::Approx(0.5));
    CHECK(s.at(110) == doctest::Approx(0.0));
  }
  SUBCASE("linear scaling rule and parsing") {
    CHECK(linearly_scaled_lr(0.1, 1024) == doctest::Approx(0.4));
    CHECK(sgp::parse_name<LrDecay>("cosine", "--lr-decay") == LrDecay::cosine);
    CHECK_THROWS_AS(sgp::parse_name<LrDecay>("exp", "--lr-decay"), sgp::InputError);
  }
}
