#pragma once
// Periodic global averaging (Gossip-PGA, `--global-average-every H`): iterations t with
// (t + 1) % H == 0 replace the gossip round by the ring allreduce's exact average of z; every
// other round is the gossip engine's. After an exact round every peer has w = 1 and x = z = the
// average. With H = 1 every round is the ring allreduce of z = x (w stays 1): the same arithmetic,
// in the same order, as `--algo allreduce`, so the same bits.
//
// Both engines share one transport: a peer that is done with a round may already send the next
// round's messages (of the other engine) to one still waiting in this one. LaneTransport sorts
// what arrives by wire dtype into two lanes, ring allreduce messages (dtype 3) and the rest,
// each a Transport of its own, so that neither engine sees (and rejects) the other's messages.
// Sync mode only (one thread receives).
#include <cstdint>
#include <deque>
#include <memory>

#include "sgp/gossip/mixer.hpp"
#include "sgp/gossip/push_sum_config.hpp"
#include "sgp/transport/transport.hpp"

namespace sgp::gossip {

class PushSumEngine;
class RingAllReduce;

// Whether iteration `iteration` ends with an exact average (every > 0: (iteration + 1) % every
// == 0; every == 0: never).
bool exact_average_round(std::int64_t iteration, int every);

// The two lanes of one transport; receive from either on one thread at a time.
class LaneTransport {
 public:
  explicit LaneTransport(transport::Transport& inner);
  LaneTransport(const LaneTransport&) = delete;
  LaneTransport& operator=(const LaneTransport&) = delete;
  ~LaneTransport();

  transport::Transport& ring();
  transport::Transport& gossip();

 private:
  class Lane;
  // The next message for `lane` within the timeout, queuing the other lane's on the way.
  std::optional<transport::Message> receive(Lane& lane, std::chrono::milliseconds timeout);

  transport::Transport& inner_;
  std::unique_ptr<Lane> ring_, gossip_;
};

class PeriodicAverage final : public Mixer {
 public:
  // x: n floats in backend memory; config.global_average_every > 0, config.gossip_every 1, sync
  // mode.
  PeriodicAverage(compute::Backend& backend, const topology::Schedule& schedule,
                  transport::Transport& transport, float* x, std::size_t n,
                  const PushSumConfig& config);
  ~PeriodicAverage() override;

  bool step(std::int64_t iteration) override;
  void finish() override;
  // `round` iterations done (gossip_every is 1): exact rounds do not advance the topology's
  // phases, so the gossip engine has mixed round - round / H of them, the ring round / H.
  void restore(std::int64_t round, double weight) override;
  void debias(float* z) override;
  std::optional<double> z_scale() const override;
  const float* trainable_z() const override;
  double weight() const override;
  std::int64_t round() const override;
  PushSumMetrics metrics() const override;

 private:
  compute::Backend& backend_;
  float* x_;
  std::size_t n_;
  int every_;
  LaneTransport lanes_;
  std::unique_ptr<PushSumEngine> gossip_;
  std::unique_ptr<RingAllReduce> ring_;
};

}  // namespace sgp::gossip
