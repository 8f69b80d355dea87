#pragma once
// A 4-peer test topology whose push-sum weights w move: period 2 (phase 0: i -> i+1, phase 1:
// i -> i+2), and each rank pushes its own share (0.3, 0.5, 0.6, 0.4): columns sum to 1, rows do
// not. Each peer hears exactly one in-neighbour per round, so sums are formed in one order and
// runs repeat bit for bit. Used by the trainer's and the update rules' tests.
namespace sgp::testing {

inline constexpr const char* kMovingWeights = R"(digraph topology {
  period = 2;
  0 -> 1 [weight=0.3, phase=0]; 1 -> 2 [weight=0.5, phase=0];
  2 -> 3 [weight=0.6, phase=0]; 3 -> 0 [weight=0.4, phase=0];
  0 -> 2 [weight=0.3, phase=1]; 1 -> 3 [weight=0.5, phase=1];
  2 -> 0 [weight=0.6, phase=1]; 3 -> 1 [weight=0.4, phase=1];
})";

}  // namespace sgp::testing
