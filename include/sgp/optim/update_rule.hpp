#pragma once
// What a peer does with its stochastic gradient each iteration, around the engine's round
// (issue 35; the rules in full, with their symbols, in docs/optimizers.md):
//   - plain (sgp, osgp, asgp, dpsgd, exact, allreduce, local with --momentum-kind local): the
//     optimizer's step on the numerator x (model::Sgd), then the round;
//   - gt (gradient tracking, Push-DIGing / ADD-OPT, with momentum tracking): u = the local
//     optimizer's direction (momentum of g), y <- y + u(t) - u(t-1) (y(0) = u(0)), a step of x
//     along y, then the round mixes [x; y] in one message;
//     agt the same over asgp's engine, whose caller holds [z; y / w] (tracker_gain());
//   - --momentum-kind quasi-global (Lin et al. 2021): the step is z - lr (g + beta m) written back
//     into x; after the round m <- beta m + (1 - beta) (z_before - z_after) / lr;
//   - --slow-momentum (SlowMo, on --global-average-every's exact averages): an outer momentum
//     step from the last exact average.
// Weight decay in gt and quasi-global is part of f_i: wd z is added to g first (the plain rule
// keeps model::Sgd's wd x). Every operation is the backend's, so the CUDA backend runs them too.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "sgp/compute/backend.hpp"
#include "sgp/compute/device_buffer.hpp"
#include "sgp/config/train_config.hpp"
#include "sgp/model/sgd.hpp"

namespace sgp::gossip {
class Mixer;
}

namespace sgp::optim {

// Where each part of a peer's state lives in its one state buffer, so that the engine mixes a
// prefix of it and a checkpoint saves all of it (n = the model's parameters):
//   [0, n)      x, the push-sum numerator of the parameters
//   [n, 2n)     gt: y, the tracker's numerator (mixed with x: the engine mixes [x; y])
//   then, not mixed: gt: u, the last local direction y took in; slow momentum: z_prev, then u.
struct StateLayout {
  std::size_t parameters = 0;     // n
  std::size_t mixed = 0;          // what the engine mixes: n, or 2n for gt
  std::size_t total = 0;          // the whole buffer
  std::size_t last_gradient = 0;  // gt: offset of the last direction u (0: none)
  std::size_t slow_anchor = 0;    // slow momentum: offset of z_prev (u follows it; 0: none)
};
StateLayout state_layout(const config::TrainConfig& config, std::size_t parameters);

// What --momentum-kind, --global-average-every and --slow-momentum add to the algorithm, e.g.
// "quasi-global momentum + PGA H=8 + SlowMo 0.5" (summaries); nullopt when nothing.
std::optional<std::string> describe_update_rule(const config::TrainConfig& config);

class UpdateRule {
 public:
  // state: layout.total floats in backend memory, x first; sgd: the local optimizer, whose
  // velocity is the momentum buffer of every rule (m for quasi-global, gt's tracked momentum).
  UpdateRule(const config::TrainConfig& config, compute::Backend& backend,
             const StateLayout& layout, float* state, model::Sgd& sgd);

  // The engine whose rounds mix() runs (null: the peer trains alone).
  void set_engine(gossip::Mixer* engine) { engine_ = engine; }
  // A fresh start: x holds the initial model. Sets the rest of the state (y is set by the first
  // step, from its gradient; slow momentum: z_prev = x, u = 0).
  void start();
  // A resume: the whole state came from a checkpoint.
  void resumed() { tracking_started_ = true; }

  // The local step of an iteration: `grads` (n floats; weight decay is added into them) is the
  // gradient at z = scale * x.
  void local_step(float* grads, float scale, float lr);
  // The engine's round of `iteration`, then what follows it (the quasi-global buffer, slow
  // momentum at exact averages). Returns whether the engine mixed.
  bool mix(std::int64_t iteration);

  // gt: the tracker y (n floats in backend memory).
  const float* tracker() const { return x_ + layout_.parameters; }

 private:
  void tracking_step(float* grads, float scale, float lr);
  float tracker_gain() const;
  void quasi_global_step(float* grads, float scale, float lr);
  void update_quasi_global_buffer();
  void slow_momentum_step();

  const config::TrainConfig config_;  // a copy: callers may pass a temporary
  compute::Backend& backend_;
  StateLayout layout_;
  float* x_;
  model::Sgd& sgd_;
  gossip::Mixer* engine_ = nullptr;
  compute::DeviceBuffer<float> z_before_;  // quasi-global: z before the step (then its change)
  float lr_ = 0.0f;                        // of the last local step
  bool tracking_started_ = false;
};

}  // namespace sgp::optim
