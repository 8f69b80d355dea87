#pragma once
// What a training loop needs from a gossip engine, whatever the algorithm: PushSumEngine (sgp,
// osgp, dpsgd, exact: rounds in lock step), AsyncPushSum (asgp: nobody waits, running sums,
// peers may fail, join and leave) and RingAllReduce (allreduce: w stays 1). Each keeps the
// push-sum weight w and mixes the caller's buffer (n floats in the backend's memory, given to
// make_mixer) in place. What that buffer holds, engine by engine:
//   - PushSumEngine: the numerator x; the caller trains on z = x / w, through z_scale() = 1 / w
//     or the z that debias() writes.
//   - RingAllReduce: x with w = 1 always, so x is z (z_scale() = 1).
//   - AsyncPushSum: z itself (z_scale() = nullopt): the engine holds the mass as (w z, w) and
//     mixes the buffer in place (a device backend's through a host mirror, written back after
//     every round and in debias()); what the caller changed in it (its step) is a change of z,
//     i.e. w times as much of x.
// So a caller that trains on the buffer scaled by z_scale(), and calls debias() before each step
// where z_scale() is nullopt, trains on z with every engine.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

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

// A change of membership this peer saw, for summaries: "excluded", "joined", "left".
struct MembershipEvent {
  std::string what;
  int rank = 0;
  std::int64_t round = 0;  // this peer's round when it learnt it
};

// Peers that fail, join and leave a run in progress: what an engine whose group can change
// (asgp's) offers through Mixer::membership_control(); the others mix in a fixed group.
class MembershipControl {
 public:
  // For a rank that died or never started: asks for admission and takes the sponsor's half of
  // its mass (x, w) and its round; returns that round. IoError when no live peer admits it
  // within the timeout. Before the first step().
  virtual std::int64_t join() = 0;
  // Hands all mass to a live out-neighbour, tells everyone, and stops mixing.
  virtual void leave() = 0;
  // What this peer saw, in order.
  virtual const std::vector<MembershipEvent>& events() const = 0;

 protected:
  ~MembershipControl() = default;
};

// A run's work as a budget of samples over all peers (--work budget; asgp's engine): the caller
// says how many samples this peer has trained on, the engine tells the others and learns theirs,
// and says when the sum it knows has reached the budget (or another peer said so). No server:
// every peer keeps the newest count of every rank (and incarnation) it heard of.
class SampleBudget {
 public:
  // This peer's running count of samples (only grows); announced to the others as it grows.
  virtual void count_samples(std::int64_t taken) = 0;
  // The sum of the newest counts this peer knows of, its own included: at most the true sum.
  virtual std::int64_t samples_known() const = 0;
  // Whether the run's budget is spent: the known sum reached it, or another peer said it had.
  virtual bool budget_spent() const = 0;
  // Before the first sample: returns once every live peer has said it is ready to count (or
  // after one time-out), so that the peers that start first do not spend the budget's first
  // samples while a late one still loads its data.
  virtual void await_all_started() = 0;

 protected:
  ~SampleBudget() = default;
};

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
  // Where z_scale() is nullopt: the caller's buffer itself, when it holds the de-biased values to
  // train on as it stands (AsyncPushSum on the CPU: z, to half a unit in the last place), so
  // that a step needs no debias() pass; nullptr otherwise.
  virtual const float* trainable_z() const { return nullptr; }
  virtual double weight() const = 0;
  virtual std::int64_t round() const = 0;
  virtual PushSumMetrics metrics() const = 0;
  // Joining and leaving, for an engine whose group can change; nullptr for a fixed group.
  virtual MembershipControl* membership_control() { return nullptr; }
  // The run's sample budget, for an engine that has one (asgp with config.sample_budget > 0).
  virtual SampleBudget* sample_budget() { return nullptr; }
  // Between the rounds of a loop that computes nothing (sgp consensus): handles what arrives
  // during `duration` where nobody waits (asgp, whose rounds this paces); an engine whose step()
  // waits for its neighbours returns at once.
  virtual void idle(std::chrono::milliseconds duration) { (void)duration; }
  // Called now and then during a long pause of the caller's loop that reads z (a test-set
  // evaluation): an engine whose neighbours take a silent peer for dead lets them hear from it,
  // moving no mass and taking nothing in (asgp); the others do nothing.
  virtual void stay_heard() {}
  // Around such a pause (stay_heard() is called between them): an engine whose neighbours push to
  // it while it does not mix asks them to keep their pushes meanwhile (asgp); the others do
  // nothing. end_pause() after begin_pause() only.
  virtual void begin_pause() {}
  virtual void end_pause() {}
};

// The engine for config.mode: AsyncPushSum for async, RingAllReduce for allreduce (over the
// schedule's ranks, ignoring its edges), CompressedPushSum with config.compressor,
// PeriodicAverage with config.global_average_every > 0, PushSumEngine otherwise.
std::unique_ptr<Mixer> make_mixer(compute::Backend& backend, const topology::Schedule& schedule,
                                  transport::Transport& transport, float* x, std::size_t n,
                                  const PushSumConfig& config);

}  // namespace sgp::gossip
