#pragma once
// N peers of synchronous push-sum with compressed gossip (issue 37; docs/simulation.md,
// "Compressed gossip"). CHOCO-style public copies (Koloskova et al. 2019) on a column-stochastic
// directed, time-varying schedule A (p_ij = the weight j pushes to i):
//   1. every peer i sends q_i = C(x_i - xhat_i) to each peer it pushes to in any phase of the
//      period, and it and they add decode(q_i) (times copy_scale) to their copy xhat_i (the same
//      bytes and the same additions: the copies stay equal bit for bit, so the simulation keeps
//      one);
//   2. x_i += gamma (sum_{j -> i} p_ij xhat_j - c_i xhat_i), c_i = sum_{i -> j} p_ji, over the
//      round's edges, and w_i += gamma (sum_{j -> i} p_ij w_j - c_i w_i) (w is sent whole).
// Sum_i x_i and sum_i w_i are conserved exactly by step 2 (each xhat_j is added with the weights
// its owner subtracts), whatever the compressor; at the fixed point xhat = x, A's mixing is at
// rest and z_i = x_i / w_i = sum x / sum w, the exact mean. x, w and the copies are double (as
// asgp's simulation), the payload's values float32.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "sgp/compress/compressor.hpp"
#include "sgp/simulate/peer_pool.hpp"
#include "sgp/topology/schedule.hpp"

namespace sgp::simulate {

// The copies' scale and the default consensus step: compress::copy_scale,
// compress::default_consensus_step (compressor.hpp).
class CompressedPopulation {
 public:
  // Every x and copy starts at zero, every w at 1. gamma in (0, 1]; `seed` seeds the
  // compressors' random choices (per peer and round).
  CompressedPopulation(topology::Schedule schedule, std::size_t dim, compress::Compressor c,
                       double gamma, std::uint64_t seed, PeerPool& pool);

  int peers() const { return schedule_.num_peers(); }
  std::size_t dim() const { return dim_; }
  std::span<double> x(int rank) { return {x_.data() + offset(rank), dim_}; }
  std::span<const double> public_copy(int rank) const {
    return {xhat_.data() + offset(rank), dim_};
  }
  const double* data() const { return x_.data(); }
  const std::vector<double>& weights() const { return w_; }

  // One round: steps 1 and 2 above. Returns the payload bytes sent in it by all peers (each
  // payload counted once per recipient).
  std::uint64_t mix(std::int64_t round);

  // A difference x_i - xhat_i was not finite in float32 (gamma too large): the last mix sent
  // nothing from that peer, and the run must stop.
  bool diverged() const { return diverged_; }

  std::size_t bytes() const { return (3 * x_.size() + 2 * w_.size()) * sizeof(double); }

 private:
  std::size_t offset(int rank) const { return static_cast<std::size_t>(rank) * dim_; }
  std::uint64_t update_public_copies(std::int64_t round);
  void mix_copies(std::int64_t round);

  topology::Schedule schedule_;
  std::size_t dim_;
  compress::Compressor compressor_;
  double gamma_;
  std::uint64_t seed_;
  double copy_scale_;
  PeerPool& pool_;
  std::vector<std::size_t> recipients_;  // per rank: the peers it pushes to over a period
  std::vector<double> x_;
  std::vector<double> xhat_;
  std::vector<double> next_;
  std::vector<double> w_;
  std::vector<double> next_w_;
  std::vector<std::vector<float>> difference_;
  std::atomic<bool> diverged_{false};  // per pool thread: x_i - xhat_i in float32
};

}  // namespace sgp::simulate
