#pragma once
// What a training loop needs from a gossip engine, whatever the algorithm: PushSumEngine (sgp,
// osgp, dpsgd, exact: rounds in lock step), AsyncPushSum (asgp: nobody waits, running sums,
// peers may fail, join and leave) and RingAllReduce (allreduce: w stays 1) all mix the caller's
// parameters x in place and keep the push-sum weight w; the caller trains on z = x / w.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "sgp/gossip/push_sum_config.hpp"

namespace sgp::compute {
class Backend;
}
namespace sgp::topology {
class Schedule;
}
namespace sgp::transport {
class Transport;
}

namespace sgp::gossip {

class Mixer {
 public:
  virtual ~Mixer() = default;
  Mixer() = default;
  Mixer(const Mixer&) = delete;
  Mixer& operator=(const Mixer&) = delete;

  // Gossips when (iteration + 1) % gossip_every == 0; returns whether it did.
  virtual bool step(std::int64_t iteration) = 0;
  // After the last iteration: nothing of this peer's mass is left in flight that could still be
  // applied (see each engine for what it waits for).
  virtual void finish() = 0;
  // Resuming from a checkpoint: `round` rounds done, push-sum weight `weight`.
  virtual void restore(std::int64_t round, double weight) = 0;
  // z = x / w (z: as many floats as x, in the backend's memory).
  virtual void debias(float* z) = 0;
  // s with z = s * x for the caller's x as it stands, so that the caller can train on x scaled by
  // s instead of a z that debias() writes; nullopt where debias() must run before each step
  // (AsyncPushSum: its caller's x already is z, and debias() takes in what arrived since).
  virtual std::optional<double> z_scale() const = 0;
  virtual double weight() const = 0;
  virtual std::int64_t round() const = 0;
  virtual PushSumMetrics metrics() const = 0;
};

// The engine for config.mode: AsyncPushSum for async, RingAllReduce for allreduce (over the
// schedule's ranks, ignoring its edges), PeriodicAverage with config.global_average_every > 0,
// PushSumEngine otherwise.
std::unique_ptr<Mixer> make_mixer(compute::Backend& backend, const topology::Schedule& schedule,
                                  transport::Transport& transport, float* x, std::size_t n,
                                  const PushSumConfig& config);

}  // namespace sgp::gossip
