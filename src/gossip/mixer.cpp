#include "sgp/gossip/mixer.hpp"

#include "sgp/gossip/async_push_sum.hpp"
#include "sgp/gossip/compressed_push_sum.hpp"
#include "sgp/gossip/periodic_average.hpp"
#include "sgp/gossip/push_sum_engine.hpp"
#include "sgp/gossip/ring_allreduce.hpp"
#include "sgp/topology/schedule.hpp"

namespace sgp::gossip {

std::unique_ptr<Mixer> make_mixer(compute::Backend& backend, const topology::Schedule& schedule,
                                  transport::Transport& transport, float* x, std::size_t n,
                                  const PushSumConfig& config) {
  if (config.mode == Mode::async) {
    return std::make_unique<AsyncPushSum>(backend, schedule, transport, x, n, config);
  }
  if (config.mode == Mode::allreduce) {
    return std::make_unique<RingAllReduce>(backend, schedule.num_peers(), transport, x, n, config);
  }
  if (config.compressor) {
    return std::make_unique<CompressedPushSum>(backend, schedule, transport, x, n, config);
  }
  if (config.global_average_every > 0) {
    return std::make_unique<PeriodicAverage>(backend, schedule, transport, x, n, config);
  }
  return std::make_unique<PushSumEngine>(backend, schedule, transport, x, n, config);
}

}  // namespace sgp::gossip
