#pragma once
// What every fuzz target shares. A target feeds its input to one reader and accepts exactly one
// outcome besides success: sgp::Error (InputError, IoError, InvariantError are how sgp refuses
// bad input). Anything else (a crash, a sanitizer report, std::bad_alloc, std::length_error, any
// other exception escaping) is a finding.
//
// Built two ways (tests/meson.build): with clang and -Dfuzz=true, linked with libFuzzer
// (`meson test --suite fuzz` fuzzes each for a few seconds); in every other build, linked with
// replay_main.cpp, which runs the seed corpus tests/fuzz/corpus/<target>/ through the target as
// a unit test, so the corpus is checked by every build.
#include <cstddef>
#include <cstdint>
#include <span>

#include "sgp/error.hpp"

namespace sgp::fuzz {

// Runs fn(bytes); sgp::Error is the expected refusal, everything else propagates.
template <typename Fn>
int run_target(const std::uint8_t* data, std::size_t size, Fn fn) {
  try {
    fn(std::span<const std::uint8_t>(data, size));
  } catch (const sgp::Error&) {
  }
  return 0;
}

}  // namespace sgp::fuzz
