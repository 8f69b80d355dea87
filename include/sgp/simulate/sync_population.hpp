#pragma once
// N peers of synchronous push-sum (SGP) in one process: every peer's float32 x in one array
// (rank-major) and its weight w, mixed a round at a time with the arithmetic PushSumEngine uses
// (gossip/push_sum_arithmetic.hpp) on the same Schedule, in parallel over ranges of receivers.
// A round reads the previous round's x and writes the next into a second array: two copies of
// N x D floats, no message buffers (a synchronous push carries the sender's x unscaled, so the
// receiver reads it where it lies).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "sgp/compute/cpu_backend.hpp"
#include "sgp/simulate/peer_pool.hpp"
#include "sgp/topology/schedule.hpp"

namespace sgp::simulate {

class SyncPopulation {
 public:
  // Every x starts at zero and every w at 1.
  SyncPopulation(topology::Schedule schedule, std::size_t dim, PeerPool& pool);

  int peers() const { return schedule_.num_peers(); }
  std::size_t dim() const { return dim_; }
  const topology::Schedule& schedule() const { return schedule_; }
  std::span<float> x(int rank) { return {x_.data() + offset(rank), dim_}; }
  std::span<const float> x(int rank) const { return {x_.data() + offset(rank), dim_}; }
  const float* data() const { return x_.data(); }
  const std::vector<double>& weights() const { return w_; }
  // One round, as PushSumEngine::mix in sync mode at every peer: keep p_ii of (x, w), add p_ji
  // of each in-neighbour's (x, w) of phase round % period (in ascending rank order).
  void mix(std::int64_t round);
  // z = x / w as PushSumEngine::debias computes it.
  void debias(int rank, float* z);
  std::size_t bytes() const { return 2 * x_.size() * sizeof(float); }

  // Membership changes (peer_changes.hpp). The schedule to mix with from the next round on.
  void set_schedule(topology::Schedule schedule) { schedule_ = std::move(schedule); }
  // The rank's mass is gone: x = 0, w = 0 (a repaired schedule leaves it alone).
  void remove(int rank);
  // x = z, w = 1 (z as debias computes it).
  void restart_from_z(int rank);
  // The joiner gets half of the sponsor's x and w, the sponsor keeps the other half.
  void share(int sponsor, int joiner);

  // Periodic global averaging: the arithmetic mean of the live peers' z (as debias computes
  // them), summed in double in rank order; then every live peer restarts at `z` (x = z, w = 1).
  std::vector<double> mean_z(const std::vector<bool>& live);
  void restart_at(const std::vector<bool>& live, const std::vector<double>& z);

 private:
  std::size_t offset(int rank) const { return static_cast<std::size_t>(rank) * dim_; }

  topology::Schedule schedule_;
  std::size_t dim_;
  PeerPool& pool_;
  std::vector<std::unique_ptr<compute::CpuBackend>> backends_;  // one per pool thread
  std::vector<float> x_;
  std::vector<float> next_;
  std::vector<double> w_;
  std::vector<double> next_w_;
  struct Incoming {
    int sender;
    double coefficient;
  };
  std::vector<std::vector<Incoming>> incoming_;  // per pool thread: this round's in-edges
};

}  // namespace sgp::simulate
