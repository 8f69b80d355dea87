#pragma once
// A simulated straggler for experiments (`--straggler RANK:FACTOR`): that rank's training steps
// take FACTOR times as long as they would, the extra time spent asleep after each step.
//
// Why not SIGSTOP/SIGCONT from outside: with more peers than cores, a stopped peer hands its
// CPU to the others, and while they wait for it (sgp) it gets a whole core back and catches up;
// measured with 8 W1 peers on 2 cores, a 75% stop duty cycle slowed the sgp run by 20%, not 4x.
// Sleeping after each step makes the straggler slow whatever the host's load.
#include <chrono>
#include <string>
#include <string_view>

namespace sgp::config {

struct StragglerSpec {
  int rank = -1;        // -1: none
  double factor = 1.0;  // >= 1: how many times longer its steps take

  bool applies_to(int r) const { return rank == r && factor > 1.0; }
};

// "" or "none": no straggler; else "RANK:FACTOR" (RANK >= 0, 1 <= FACTOR <= 1000). InputError
// "'TEXT': what" otherwise (the caller says where).
StragglerSpec parse_straggler_spec(std::string_view text);
std::string format_straggler_spec(const StragglerSpec& spec);

// The time a straggler sleeps after a step that took `step`: (factor - 1) times it.
std::chrono::nanoseconds straggler_pause(const StragglerSpec& spec, std::chrono::nanoseconds step);

}  // namespace sgp::config
