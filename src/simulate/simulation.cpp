#include "sgp/simulate/simulation.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "round_metrics.hpp"
#include "sgp/error.hpp"
#include "sgp/gossip/consensus_vectors.hpp"
#include "sgp/simulate/sync_population.hpp"

namespace sgp::simulate {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Below this fraction of its start the distance to consensus is rounding noise: float32 x
// (sync) holds about 7 digits, double (async) about 16.
double rounding_floor(MixingMode mode) { return mode == MixingMode::sync ? 1e-5 : 1e-12; }

// The usable samples end where the distance stops falling: below `floor` times its start, or
// at the first sample that is not below the one before (float32 rounding makes a plateau well
// above 1e-5 when the values are large against their spread: round to nearest then leaves x
// as it is); of those before, only the ones 10 times above that plateau.
std::size_t usable_samples(const std::vector<std::pair<std::int64_t, double>>& samples,
                           double floor) {
  const double start = samples.front().second;
  std::size_t end = samples.size();
  for (std::size_t j = 1; j < samples.size(); ++j) {
    if (samples[j].second < floor * start || samples[j].second >= samples[j - 1].second) {
      end = j;
      break;
    }
  }
  if (end == samples.size()) return end;
  const double plateau = samples[end].second;
  std::size_t usable = 0;
  while (usable < end && samples[usable].second >= 10.0 * plateau) ++usable;
  return usable;
}

ContractionFit fit_contraction(const std::vector<std::pair<std::int64_t, double>>& samples,
                               int period, double floor) {
  ContractionFit fit;
  if (samples.size() < 2 || !(samples.front().second > 0.0)) return fit;
  const std::size_t usable = usable_samples(samples, floor);
  fit.floor_reached = usable < samples.size();
  std::size_t i0 = 0, i1 = 1;  // the decay to the floor within the first samples
  if (usable >= 3) {
    i0 = (usable - 1) / 2;
    i1 = usable - 1;
  }
  const auto [t0, e0] = samples[i0];
  const auto [t1, e1] = samples[i1];
  fit.from_round = t0;
  fit.to_round = t1;
  fit.per_period = std::pow(e1 / e0, static_cast<double>(period) / static_cast<double>(t1 - t0));
  return fit;
}

std::size_t physical_memory() {
  return static_cast<std::size_t>(sysconf(_SC_PHYS_PAGES)) *
         static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

// Measurements and the contraction samples, shared by both modes.
class Recorder {
 public:
  Recorder(const topology::Schedule& schedule, const SimulationOptions& o,
           std::vector<double> target, double mean_curvature,
           const std::function<void(const RoundRecord&)>& on_record)
      : period_(schedule.period()),
        options_(o),
        target_(std::move(target)),
        mean_curvature_(mean_curvature),
        on_record_(on_record),
        sample_every_(period_ * std::max<std::int64_t>(1, o.rounds / (period_ * 4000))),
        live_(static_cast<std::size_t>(schedule.num_peers()), true) {}

  // Logged rounds, rounds with membership changes, and contraction samples until the distance
  // has reached the rounding floor (afterwards they would only cost time: a measurement reads
  // every x twice).
  bool wanted(std::int64_t round) const {
    return log_next_ || round % options_.log_every == 0 || round == options_.rounds ||
           (round % sample_every_ == 0 && !below_floor_);
  }

  // After failures or joins: the live peers, the new target if it changed, and a fresh start
  // for the contraction fit (the distance jumps).
  void on_membership(std::vector<bool> live, std::optional<std::vector<double>> target,
                     double mean_curvature) {
    live_ = std::move(live);
    if (target) target_ = std::move(*target);
    mean_curvature_ = mean_curvature;
    samples_.clear();
    below_floor_ = false;
    log_next_ = true;
  }
  const std::vector<bool>& live() const { return live_; }
  const std::vector<double>& target() const { return target_; }

  template <typename T>
  void measure(PeerPool& pool, std::int64_t round, const T* x, const std::vector<double>& w) {
    const RoundSums s = round_sums(pool, x, w, live_, options_.dim, target_);
    const auto n = static_cast<double>(s.live);
    RoundRecord r;
    r.round = round;
    r.live = s.live;
    r.sum_of_weights = s.sum_w;
    r.consensus_error = s.zbar2 > 0.0 ? s.consensus / n / s.zbar2 : s.consensus / n;
    r.target_error = s.target2 > 0.0 ? s.target / n / s.target2 : s.target / n;
    r.deviation_norm = std::sqrt(s.deviation);
    if (options_.workload == Workload::quadratic) {
      r.optimality_gap = 0.5 * mean_curvature_ * s.zbar_target;
      r.mean_peer_gap = 0.5 * mean_curvature_ * s.target / n;
    }
    if (round % sample_every_ == 0 && !below_floor_) {
      samples_.emplace_back(round, r.deviation_norm);
      below_floor_ =
          r.deviation_norm < rounding_floor(options_.mode) * samples_.front().second ||
          (samples_.size() > 1 && r.deviation_norm >= samples_[samples_.size() - 2].second);
    }
    if ((log_next_ || round % options_.log_every == 0 || round == options_.rounds) && on_record_) {
      on_record_(r);
    }
    log_next_ = false;
    last_ = r;
  }

  const RoundRecord& last() const { return last_; }
  ContractionFit contraction() const {
    return fit_contraction(samples_, period_, rounding_floor(options_.mode));
  }

 private:
  int period_;
  const SimulationOptions& options_;
  std::vector<double> target_;
  double mean_curvature_;
  const std::function<void(const RoundRecord&)>& on_record_;
  std::int64_t sample_every_;
  std::vector<std::pair<std::int64_t, double>> samples_;
  bool below_floor_ = false;
  std::vector<bool> live_;
  bool log_next_ = false;
  RoundRecord last_;
};

// Sum_i x_i / sum_i w over the live peers: what they converge to when all their mass is in x
// (after a failure every survivor holds its z with w = 1).
template <typename Population>
std::vector<double> live_mean(Population& population, const std::vector<bool>& live) {
  std::vector<double> sum(population.dim(), 0.0);
  double sum_w = 0.0;
  for (int r = 0; r < population.peers(); ++r) {
    if (!live[static_cast<std::size_t>(r)]) continue;
    const auto x = population.x(r);
    for (std::size_t k = 0; k < sum.size(); ++k) sum[k] += static_cast<double>(x[k]);
    sum_w += population.weights()[static_cast<std::size_t>(r)];
  }
  for (double& v : sum) v /= sum_w;
  return sum;
}

// The membership steps due at the start of a round, applied as asgp's peers do (the failed
// ranks' mass is gone, the survivors restart from z with w = 1 and, in async mode, give up what
// was in flight; a joiner gets half of its sponsor's mass; everyone mixes over the repaired
// schedule).
class MembershipChanges {
 public:
  MembershipChanges(const topology::Schedule& schedule, const SimulationOptions& o)
      : steps_(plan_membership(schedule, o.changes, o.rounds)) {}

  template <typename Population>
  void apply_due(std::int64_t round, Population& population, Recorder& recorder,
                 QuadraticProblem* problem) {
    for (; next_ < steps_.size() && steps_[next_].round == round; ++next_) {
      const MembershipStep& step = steps_[next_];
      for (int r : step.failed) population.remove(r);
      if (!step.failed.empty()) {
        if constexpr (requires { population.give_up_in_flight(); }) {
          population.give_up_in_flight();
        }
        for (int r = 0; r < population.peers(); ++r) {
          if (step.live[static_cast<std::size_t>(r)]) population.restart_from_z(r);
        }
      }
      for (const auto& [joiner, sponsor] : step.joined) population.share(sponsor, joiner);
      population.set_schedule(step.mixing);
      std::optional<std::vector<double>> target;
      if (problem) {
        problem->set_live(step.live);
        target = problem->optimum();
      } else if (!step.failed.empty()) {
        target = live_mean(population, step.live);  // a join keeps the totals: no change
      }
      recorder.on_membership(step.live, std::move(target),
                             problem ? problem->mean_curvature() : 0.0);
      spdlog::info("round {}: {} failed, {} joined; {} peers live", round, step.failed.size(),
                   step.joined.size(), std::count(step.live.begin(), step.live.end(), true));
    }
  }

 private:
  std::vector<MembershipStep> steps_;
  std::size_t next_ = 0;
};

class Progress {
 public:
  explicit Progress(std::int64_t rounds) : rounds_(rounds) {}
  void after(std::int64_t round) {
    if (Clock::now() < next_ && round != rounds_) return;
    next_ = Clock::now() + std::chrono::seconds(10);
    spdlog::info("round {}/{} ({:.1f} s)", round, rounds_, seconds_since(start_));
  }

 private:
  std::int64_t rounds_;
  Clock::time_point start_ = Clock::now();
  Clock::time_point next_ = Clock::now() + std::chrono::seconds(10);
};

// Peer i's starting x: the consensus vectors, or zero (quadratic). Returns the target.
template <typename T>
std::vector<double> initialise(PeerPool& pool, int peers, const SimulationOptions& o,
                               const std::function<std::span<T>(int)>& x_of,
                               const QuadraticProblem* problem) {
  if (problem) return problem->optimum();
  pool.for_ranges(static_cast<std::size_t>(peers), [&](int, std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      const auto v = gossip::consensus_initial_vector(o.seed, static_cast<int>(i), peers, o.dim);
      auto x = x_of(static_cast<int>(i));
      for (std::size_t k = 0; k < o.dim; ++k) x[k] = static_cast<T>(v[k]);
    }
  });
  // The values are integers: their sum, and so the mean, is exact in double.
  std::vector<double> mean(o.dim, 0.0);
  for (int i = 0; i < peers; ++i) {
    auto x = x_of(i);
    for (std::size_t k = 0; k < o.dim; ++k) mean[k] += static_cast<double>(x[k]);
  }
  for (double& m : mean) m /= peers;
  return mean;
}

SimulationResult run_sync(const topology::Schedule& schedule, const SimulationOptions& o,
                          const std::function<void(const RoundRecord&)>& on_record) {
  const auto setup_start = Clock::now();
  PeerPool pool(o.threads);
  SyncPopulation population(schedule, o.dim, pool);
  std::unique_ptr<QuadraticProblem> problem;
  if (o.workload == Workload::quadratic) {
    problem = std::make_unique<QuadraticProblem>(o.seed, population.peers(), o.dim, o.spread);
  }
  auto target = initialise<float>(
      pool, population.peers(), o, [&](int r) { return population.x(r); }, problem.get());
  Recorder recorder(schedule, o, std::move(target), problem ? problem->mean_curvature() : 0.0,
                    on_record);
  MembershipChanges changes(schedule, o);
  SimulationResult result;
  result.setup_time_s = seconds_since(setup_start);
  result.state_bytes = population.bytes();
  const auto start = Clock::now();
  Progress progress(o.rounds);
  changes.apply_due(0, population, recorder, problem.get());
  recorder.measure(pool, 0, population.data(), population.weights());
  std::vector<std::vector<float>> scratch(static_cast<std::size_t>(o.threads),
                                          std::vector<float>(problem ? o.dim : 0));
  for (std::int64_t r = 0; r < o.rounds; ++r) {
    if (problem) {
      // The SGP step: gradient at z = x / w, applied to x.
      pool.for_ranges(static_cast<std::size_t>(population.peers()),
                      [&](int worker, std::size_t begin, std::size_t end) {
                        float* g = scratch[static_cast<std::size_t>(worker)].data();
                        const auto lr = static_cast<float>(o.lr);
                        for (std::size_t i = begin; i < end; ++i) {
                          if (!recorder.live()[i]) continue;
                          const int rank = static_cast<int>(i);
                          population.debias(rank, g);
                          problem->gradient(rank, r, o.noise, g);
                          auto x = population.x(rank);
                          for (std::size_t k = 0; k < o.dim; ++k) x[k] -= lr * g[k];
                        }
                      });
    }
    population.mix(r);
    changes.apply_due(r + 1, population, recorder, problem.get());
    if (recorder.wanted(r + 1)) {
      recorder.measure(pool, r + 1, population.data(), population.weights());
    }
    progress.after(r + 1);
  }
  result.wall_time_s = seconds_since(start);
  result.final_record = recorder.last();
  result.target = recorder.target();
  result.contraction = recorder.contraction();
  return result;
}

SimulationResult run_async(const topology::Schedule& schedule, const SimulationOptions& o,
                           const std::function<void(const RoundRecord&)>& on_record) {
  const auto setup_start = Clock::now();
  PeerPool pool(o.threads);
  AsyncPopulation population(schedule, o.dim, o.running_sums, o.faults, pool);
  std::unique_ptr<QuadraticProblem> problem;
  if (o.workload == Workload::quadratic) {
    problem = std::make_unique<QuadraticProblem>(o.seed, population.peers(), o.dim, o.spread);
  }
  auto target = initialise<double>(
      pool, population.peers(), o, [&](int r) { return population.x(r); }, problem.get());
  Recorder recorder(schedule, o, std::move(target), problem ? problem->mean_curvature() : 0.0,
                    on_record);
  MembershipChanges changes(schedule, o);
  SimulationResult result;
  result.setup_time_s = seconds_since(setup_start);
  result.state_bytes = AsyncPopulation::bytes_needed(schedule, o.dim);
  const auto start = Clock::now();
  Progress progress(o.rounds);
  changes.apply_due(0, population, recorder, problem.get());  // nothing is in flight yet
  recorder.measure(pool, 0, population.data(), population.weights());
  std::vector<std::vector<double>> scratch(static_cast<std::size_t>(o.threads),
                                           std::vector<double>(problem ? o.dim : 0));
  // Round r applies what has arrived (and a record of round r is taken then: the mass still
  // in flight is not in any peer's w), steps, and pushes.
  for (std::int64_t r = 0; r < o.rounds; ++r) {
    population.deliver(r);
    if (r > 0) changes.apply_due(r, population, recorder, problem.get());
    if (r > 0 && recorder.wanted(r))
      recorder.measure(pool, r, population.data(), population.weights());
    if (problem) {
      // asgp's step: taken at z = x / w and added to x scaled by w.
      pool.for_ranges(static_cast<std::size_t>(population.peers()),
                      [&](int worker, std::size_t begin, std::size_t end) {
                        double* g = scratch[static_cast<std::size_t>(worker)].data();
                        for (std::size_t i = begin; i < end; ++i) {
                          if (!recorder.live()[i]) continue;
                          const int rank = static_cast<int>(i);
                          const double w = population.weights()[i];
                          auto x = population.x(rank);
                          for (std::size_t k = 0; k < o.dim; ++k) g[k] = x[k] / w;
                          problem->gradient(rank, r, o.noise, g);
                          for (std::size_t k = 0; k < o.dim; ++k) x[k] -= w * o.lr * g[k];
                        }
                      });
    }
    population.push(r);
    progress.after(r + 1);
  }
  population.deliver(o.rounds);
  recorder.measure(pool, o.rounds, population.data(), population.weights());
  result.wall_time_s = seconds_since(start);
  result.final_record = recorder.last();
  result.target = recorder.target();
  result.contraction = recorder.contraction();
  result.messages = population.counts();
  return result;
}

}  // namespace

std::size_t state_bytes(const topology::Schedule& schedule, const SimulationOptions& options) {
  if (options.mode == MixingMode::async) {
    return AsyncPopulation::bytes_needed(schedule, options.dim);
  }
  return 2 * static_cast<std::size_t>(schedule.num_peers()) * options.dim * sizeof(float);
}

void require_fits_in_memory(const topology::Schedule& schedule, const SimulationOptions& options) {
  const std::size_t need = state_bytes(schedule, options);
  const std::size_t have = physical_memory();
  if (need > have / 10 * 9) {
    throw InputError(fmt::format(
        "sgp simulate: {} peers x --dim {} in {} mode need {:.1f} GiB of state, more than this "
        "machine's {:.1f} GiB{}; use fewer peers or a smaller --dim",
        schedule.num_peers(), options.dim, options.mode == MixingMode::sync ? "sync" : "async",
        static_cast<double>(need) / (1 << 30), static_cast<double>(have) / (1 << 30),
        options.mode == MixingMode::async ? " (async keeps 4 x dim doubles per directed edge)"
                                          : ""));
  }
}

SimulationResult simulate(const topology::Schedule& schedule, const SimulationOptions& options,
                          const std::function<void(const RoundRecord&)>& on_record) {
  SGP_ENFORCE(
      options.rounds >= 1 && options.dim >= 1 && options.threads >= 1 && options.log_every >= 1,
      "bad simulation options");
  SGP_ENFORCE(options.mode == MixingMode::async || !options.faults.any(),
              "link faults need the async mode");
  require_fits_in_memory(schedule, options);
  return options.mode == MixingMode::sync ? run_sync(schedule, options, on_record)
                                          : run_async(schedule, options, on_record);
}

}  // namespace sgp::simulate
