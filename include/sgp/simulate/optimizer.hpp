#pragma once
// The decentralized optimizers `sgp simulate` runs on the quadratic workload, per peer, with the
// rules of docs/simulation.md ("Decentralized optimizers", the shared spec of issue 35). Peer i
// holds a row of the population: its push-sum numerator x_i (dim values), and with gradient
// tracking its tracker numerator y_i after it (the row [x_i | y_i] is mixed as one vector, the
// same weights for both: one message); w_i is its weight and z_i = x_i / w_i. lr = step size.
//   plain (sgp, asgp): g_i = grad f_i(z_i); local momentum m_i <- beta m_i + g_i, d = m_i (else
//     d = g_i); sync x_i <- x_i - lr d (SGP's step on the numerator), async x_i <- x_i - w_i lr d
//     (asgp's step in z, scaled by w).
//   gradient tracking (gt, agt): y_i tracks u_i, the local gradient g_i or, with momentum (gt
//     only; momentum tracking, the peers' rule), the heavy-ball buffer m_i <- beta m_i + g_i:
//     y_i(0) = u_i(0); step x_i <- x_i - lr y_i; after mixing g_i' = grad f_i(z_i), u_i' from
//     it, y_i <- y_i + u_i' - u_i.
//   quasi-global momentum: z_half = z_i - lr (g_i + beta m_i), x_i <- w_i z_half; after mixing
//     d = (z_before - z_after) / lr, m_i <- beta m_i + (1 - beta) d.
//   periodic global averaging (every H rounds an exact average of z instead of gossip) and slow
//     momentum on its results: outer_step.
// The caller gives each call the peer's current z (sync: as PushSumEngine::debias computes it).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "sgp/simulate/workload.hpp"

namespace sgp::simulate {

enum class MomentumKind { local, quasi_global };

struct OptimizerOptions {
  bool gradient_tracking = false;  // gt (sync) / agt (async)
  MomentumKind momentum_kind = MomentumKind::local;
  double momentum = 0.0;                  // beta; 0: no momentum
  std::int64_t global_average_every = 0;  // H: rounds t with (t + 1) % H == 0 average exactly
  std::optional<double> slow_momentum;    // beta_s: SlowMo's outer step at each exact average

  bool exact_round(std::int64_t round) const {
    return global_average_every > 0 && (round + 1) % global_average_every == 0;
  }
};

template <typename T>
class PeerOptimizer {
 public:
  // async: asgp's step (scaled by w) for the plain rule; sync: SGP's.
  PeerOptimizer(const OptimizerOptions& options, const QuadraticProblem& problem, int peers,
                std::size_t dim, double lr, double noise, bool async);

  // Values per peer in the mixed vector: dim, or 2 dim with a tracker.
  std::size_t row_width() const { return options_.gradient_tracking ? 2 * dim_ : dim_; }
  const OptimizerOptions& options() const { return options_; }

  // Before the first round: gradient tracking's y_i = g_i(0) at the initial z.
  void start(int rank, std::span<T> row, std::span<const T> z);
  // The local step of round `round`, before mixing. scratch: dim values.
  void step(int rank, std::int64_t round, std::span<T> row, double w, std::span<const T> z,
            std::span<T> scratch);
  // After the mixing of round `round` (async: once the next round's deliveries are applied), at
  // the mixed z: the tracker's correction, quasi-global momentum's buffer.
  void after_mixing(int rank, std::int64_t round, std::span<T> row, std::span<const T> z);

  // An exact round's result from the mean z of the live peers: the mean itself, or with slow
  // momentum u <- beta_s u + (z_prev - mean) / lr, z_prev <- z_prev - lr u (returned).
  std::vector<double> outer_step(std::vector<double> mean);

  // Gradient tracking: the gradient y_i last took in (g_i at the z after the latest mixing).
  std::span<const T> tracked_gradient(int rank) const { return slice(gradient_, rank); }
  // What y_i tracks: that gradient, or with momentum the buffer m_i it last went into.
  std::span<const T> tracked_direction(int rank) const {
    return slice(options_.momentum > 0.0 ? buffer_ : gradient_, rank);
  }

 private:
  std::span<T> slice(std::vector<T>& v, int rank) {
    return {v.data() + static_cast<std::size_t>(rank) * dim_, dim_};
  }
  std::span<const T> slice(const std::vector<T>& v, int rank) const {
    return {v.data() + static_cast<std::size_t>(rank) * dim_, dim_};
  }

  OptimizerOptions options_;
  const QuadraticProblem& problem_;
  std::size_t dim_;
  double lr_;
  double noise_;
  bool async_;
  std::vector<T> gradient_;     // gradient tracking: g_i at the latest z, per peer
  std::vector<T> buffer_;       // momentum: m_i per peer (gt: what y_i tracks)
  std::vector<T> z_before_;     // quasi-global momentum: z_i before this round's step
  std::vector<double> z_prev_;  // slow momentum: the last outer iterate (starts at zero)
  std::vector<double> slow_buffer_;
};

}  // namespace sgp::simulate
