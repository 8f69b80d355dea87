#include "sgp/simulate/simulation.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "round_metrics.hpp"
#include "sgp/error.hpp"
#include "sgp/gossip/consensus_vectors.hpp"
#include "sgp/simulate/compressed_population.hpp"
#include "sgp/simulate/sync_population.hpp"

namespace sgp::simulate {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Below this fraction of its start the distance to consensus is rounding noise: float32 x
// (sync) holds about 7 digits, double (async) about 16.
double rounding_floor(Mixing mode) { return mode == Mixing::sync ? 1e-5 : 1e-12; }

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
        live_(static_cast<std::size_t>(schedule.num_peers()), true) {
    if (o.mode == Mixing::sync) round_bytes_ = 0;
  }

  // The payload bytes of the round just mixed (sync).
  void sent(std::uint64_t bytes) {
    round_bytes_ = bytes;
    total_bytes_ += bytes;
  }

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
    const RoundSums s = round_sums(pool, x, row_width(options_), w, live_, options_.dim, target_);
    const auto n = static_cast<double>(s.live);
    RoundRecord r;
    r.round = round;
    r.live = s.live;
    r.sum_of_weights = s.sum_w;
    r.consensus_error = s.zbar2 > 0.0 ? s.consensus / n / s.zbar2 : s.consensus / n;
    r.target_error = s.target2 > 0.0 ? s.target / n / s.target2 : s.target / n;
    r.deviation_norm = std::sqrt(s.deviation);
    if (round_bytes_) {
      r.bytes_sent = *round_bytes_;
      r.total_bytes_sent = total_bytes_;
    }
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
    if (!std::isfinite(r.target_error) && !diverged_) diverged_ = round;
  }

  // The first measured round whose z were not finite (a diverging optimizer): the run stops.
  std::optional<std::int64_t> diverged() const { return diverged_; }

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
  std::optional<std::int64_t> diverged_;
  std::optional<std::uint64_t> round_bytes_;
  std::uint64_t total_bytes_ = 0;
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

// The optimizer's calls (optimizer.hpp) over every live peer, in parallel, each given the
// peer's z (sync: as PushSumEngine::debias computes it; async: x / w in double).
template <typename T, typename Population>
class Steps {
 public:
  Steps(PeerPool& pool, Population& population, const SimulationOptions& o,
        const QuadraticProblem& problem, bool async)
      : pool_(pool),
        population_(population),
        optimizer_(o.optimizer, problem, population.peers(), o.dim, o.lr, o.noise, async),
        z_(static_cast<std::size_t>(pool.threads()), std::vector<T>(population.dim())),
        scratch_(z_.size(), std::vector<T>(o.dim)) {
    const auto& p = o.optimizer;
    after_mixing_ =
        p.gradient_tracking || (p.momentum > 0.0 && p.momentum_kind == MomentumKind::quasi_global);
  }

  PeerOptimizer<T>& optimizer() { return optimizer_; }
  void start(const std::vector<bool>& live) {
    each_live(live, [&](int rank, int, std::span<T> row, const std::vector<T>& z) {
      optimizer_.start(rank, row, z);
    });
  }
  void step(std::int64_t round, const std::vector<bool>& live) {
    each_live(live, [&](int rank, int worker, std::span<T> row, const std::vector<T>& z) {
      optimizer_.step(rank, round, row, population_.weights()[static_cast<std::size_t>(rank)], z,
                      scratch_[static_cast<std::size_t>(worker)]);
    });
  }
  void after_mixing(std::int64_t round, const std::vector<bool>& live) {
    if (!after_mixing_) return;
    each_live(live, [&](int rank, int, std::span<T> row, const std::vector<T>& z) {
      optimizer_.after_mixing(rank, round, row, z);
    });
  }

 private:
  template <typename Fn>
  void each_live(const std::vector<bool>& live, const Fn& fn) {
    pool_.for_ranges(live.size(), [&](int worker, std::size_t begin, std::size_t end) {
      auto& z = z_[static_cast<std::size_t>(worker)];
      for (std::size_t i = begin; i < end; ++i) {
        if (!live[i]) continue;
        const int rank = static_cast<int>(i);
        if constexpr (std::is_same_v<T, float>) {
          population_.debias(rank, z.data());
        } else {
          const auto x = population_.x(rank);
          for (std::size_t k = 0; k < z.size(); ++k) z[k] = x[k] / population_.weights()[i];
        }
        fn(rank, worker, population_.x(rank), z);
      }
    });
  }

  PeerPool& pool_;
  Population& population_;
  PeerOptimizer<T> optimizer_;
  bool after_mixing_ = false;
  std::vector<std::vector<T>> z_;
  std::vector<std::vector<T>> scratch_;
};

// The float32 payloads of a push-sum round: a row of x per edge.
std::uint64_t push_bytes(const topology::Schedule& schedule, std::int64_t round,
                         std::size_t width) {
  std::uint64_t edges = 0;
  for (int r = 0; r < schedule.num_peers(); ++r) edges += schedule.out_edges(r, round).size();
  return edges * width * sizeof(float);
}

// An exact average as a ring allreduce computes it: every live peer sends 2 (n - 1) / n of its
// row (reduce-scatter, then all-gather).
std::uint64_t allreduce_bytes(const std::vector<bool>& live, std::size_t width) {
  const auto n = static_cast<std::uint64_t>(std::count(live.begin(), live.end(), true));
  return n < 2 ? 0 : 2 * (n - 1) * width * sizeof(float);
}

// What both modes set up before their rounds.
struct Setup {
  std::unique_ptr<QuadraticProblem> problem;
  std::vector<double> target;
};

template <typename T, typename Population>
Setup set_up(PeerPool& pool, Population& population, const SimulationOptions& o) {
  Setup s;
  if (o.workload == Workload::quadratic) {
    s.problem = std::make_unique<QuadraticProblem>(o.seed, population.peers(), o.dim, o.spread);
  }
  s.target = initialise<T>(
      pool, population.peers(), o, [&](int r) { return population.x(r); }, s.problem.get());
  return s;
}

// What run_sync and run_async hold around their rounds: the problem, the recorder, the
// membership changes and the optimizer's steps (on the quadratic workload).
template <typename T, typename Population>
struct SteppedRun {
  Setup setup;
  Recorder recorder;
  MembershipChanges changes;
  std::optional<Steps<T, Population>> steps;

  SteppedRun(const topology::Schedule& schedule, const SimulationOptions& o, PeerPool& pool,
             Population& population, bool asynchronous,
             const std::function<void(const RoundRecord&)>& on_record)
      : setup(set_up<T>(pool, population, o)),
        recorder(schedule, o, std::move(setup.target),
                 setup.problem ? setup.problem->mean_curvature() : 0.0, on_record),
        changes(schedule, o) {
    if (setup.problem) steps.emplace(pool, population, o, *setup.problem, asynchronous);
  }
  QuadraticProblem* problem() const { return setup.problem.get(); }

  // Round 0: the changes due then (nothing is in flight yet), the steps' start, the first record.
  void start(PeerPool& pool, Population& population) {
    changes.apply_due(0, population, recorder, problem());
    if (steps) steps->start(recorder.live());
    recorder.measure(pool, 0, population.data(), population.weights());
  }
};

// A result that knows its set-up: the time it took (from setup_start) and the state's bytes.
SimulationResult set_up_result(Clock::time_point setup_start, const topology::Schedule& schedule,
                               const SimulationOptions& o) {
  SimulationResult result;
  result.setup_time_s = seconds_since(setup_start);
  result.state_bytes = state_bytes(schedule, o);
  return result;
}

// The rounds' wall time (from start) and what the recorder ends with.
void finish(SimulationResult& result, const Recorder& recorder, Clock::time_point start) {
  result.wall_time_s = seconds_since(start);
  result.final_record = recorder.last();
  result.target = recorder.target();
  result.contraction = recorder.contraction();
  if (!result.diverged_at) result.diverged_at = recorder.diverged();
}

SimulationResult run_sync(const topology::Schedule& schedule, const SimulationOptions& o,
                          const std::function<void(const RoundRecord&)>& on_record) {
  const auto setup_start = Clock::now();
  PeerPool pool(o.threads);
  SyncPopulation population(schedule, row_width(o), pool);
  SteppedRun<float, SyncPopulation> run(schedule, o, pool, population, false, on_record);
  SimulationResult result = set_up_result(setup_start, schedule, o);
  const auto start = Clock::now();
  Progress progress(o.rounds);
  run.start(pool, population);
  for (std::int64_t r = 0; r < o.rounds; ++r) {
    // SGP's round: the step (gradient at z = x / w, applied to x), then the mixing.
    if (run.steps) run.steps->step(r, run.recorder.live());
    if (o.optimizer.exact_round(r)) {
      const auto& live = run.recorder.live();
      population.restart_at(live, run.steps->optimizer().outer_step(population.mean_z(live)));
      run.recorder.sent(allreduce_bytes(live, row_width(o)));
    } else {
      population.mix(r);
      run.recorder.sent(push_bytes(population.schedule(), r, row_width(o)));
    }
    if (run.steps) run.steps->after_mixing(r, run.recorder.live());
    run.changes.apply_due(r + 1, population, run.recorder, run.problem());
    if (run.recorder.wanted(r + 1)) {
      run.recorder.measure(pool, r + 1, population.data(), population.weights());
    }
    if (run.recorder.diverged()) break;
    progress.after(r + 1);
  }
  finish(result, run.recorder, start);
  return result;
}

// sgp with compressed gossip (compressed_population.hpp), consensus workload, fixed membership.
SimulationResult run_compressed(const topology::Schedule& schedule, const SimulationOptions& o,
                                const std::function<void(const RoundRecord&)>& on_record) {
  const auto setup_start = Clock::now();
  PeerPool pool(o.threads);
  CompressedPopulation population(schedule, o.dim, *o.compressor, consensus_step(o), o.seed, pool);
  Setup setup = set_up<double>(pool, population, o);
  Recorder recorder(schedule, o, std::move(setup.target), 0.0, on_record);
  SimulationResult result = set_up_result(setup_start, schedule, o);
  const auto start = Clock::now();
  Progress progress(o.rounds);
  recorder.measure(pool, 0, population.data(), population.weights());
  for (std::int64_t r = 0; r < o.rounds; ++r) {
    recorder.sent(population.mix(r));
    if (recorder.wanted(r + 1) || population.diverged()) {
      recorder.measure(pool, r + 1, population.data(), population.weights());
    }
    if (population.diverged() || recorder.diverged()) {
      result.diverged_at = recorder.diverged().value_or(r + 1);
      break;
    }
    progress.after(r + 1);
  }
  finish(result, recorder, start);
  return result;
}

SimulationResult run_async(const topology::Schedule& schedule, const SimulationOptions& o,
                           const std::function<void(const RoundRecord&)>& on_record) {
  const auto setup_start = Clock::now();
  PeerPool pool(o.threads);
  AsyncPopulation population(schedule, row_width(o), o.running_sums, o.faults, pool);
  SteppedRun<double, AsyncPopulation> run(schedule, o, pool, population, true, on_record);
  SimulationResult result = set_up_result(setup_start, schedule, o);
  const auto start = Clock::now();
  Progress progress(o.rounds);
  run.start(pool, population);
  // Round r applies what has arrived (the end of round r - 1's mixing: a record of round r is
  // taken then, the mass still in flight is not in any peer's w), steps (asgp's step: taken at
  // z = x / w and added to x scaled by w), and pushes.
  Recorder& recorder = run.recorder;
  for (std::int64_t r = 0; r < o.rounds; ++r) {
    population.deliver(r);
    if (r > 0) {
      if (run.steps) run.steps->after_mixing(r - 1, recorder.live());
      run.changes.apply_due(r, population, recorder, run.problem());
      if (recorder.wanted(r)) recorder.measure(pool, r, population.data(), population.weights());
      if (recorder.diverged()) break;
    }
    if (run.steps) run.steps->step(r, recorder.live());
    population.push(r);
    progress.after(r + 1);
  }
  if (!recorder.diverged()) {
    population.deliver(o.rounds);
    if (run.steps) run.steps->after_mixing(o.rounds - 1, recorder.live());
    recorder.measure(pool, o.rounds, population.data(), population.weights());
  }
  finish(result, recorder, start);
  result.messages = population.counts();
  return result;
}

}  // namespace

const char* algorithm_name(const SimulationOptions& o) {
  if (o.mode == Mixing::sync) return o.optimizer.gradient_tracking ? "gt" : "sgp";
  return o.optimizer.gradient_tracking ? "agt" : "asgp";
}

void require_valid_compression(const SimulationOptions& o) {
  if (!o.compressor) {
    if (o.consensus_step != 0.0) {
      throw InputError("sgp simulate: --consensus-step is for compressed gossip (--compress)");
    }
    return;
  }
  const auto refuse = [&](const std::string& what) {
    throw InputError(fmt::format("sgp simulate: --compress {} {}",
                                 compress::compressor_name(*o.compressor), what));
  };
  if (o.mode != Mixing::sync || o.optimizer.gradient_tracking) {
    refuse(fmt::format("with --algo {}: compressed gossip is simulated for --algo sgp only",
                       algorithm_name(o)));
  }
  if (o.workload != Workload::consensus) refuse("is simulated on --workload consensus only");
  if (!o.changes.empty())
    refuse(
        "with --fail / --join is not supported (the public copies of a failed peer are not "
        "defined)");
  if (!(o.consensus_step >= 0.0 && o.consensus_step <= 1.0)) {
    refuse(fmt::format("--consensus-step {}: expected gamma in (0, 1]", o.consensus_step));
  }
}

double consensus_step(const SimulationOptions& o) {
  if (o.consensus_step > 0.0) return o.consensus_step;
  return compress::default_consensus_step(*o.compressor, o.dim);
}

void require_valid_optimizer(const SimulationOptions& o) {
  require_valid_compression(o);
  const auto& p = o.optimizer;
  const auto refuse = [](const std::string& what) {
    throw InputError(fmt::format("sgp simulate: {}", what));
  };
  std::vector<std::string> used;  // the optimizer's flags given
  if (p.gradient_tracking) used.push_back(fmt::format("--algo {}", algorithm_name(o)));
  if (p.momentum > 0.0) used.emplace_back("--momentum");
  if (p.global_average_every > 0) used.emplace_back("--global-average-every");
  if (p.slow_momentum) used.emplace_back("--slow-momentum");
  if (used.empty()) {
    if (p.momentum_kind == MomentumKind::quasi_global) {
      refuse("--momentum-kind quasi-global needs --momentum B (0 < B < 1)");
    }
    return;
  }
  if (o.workload != Workload::quadratic) {
    refuse(fmt::format("{} is for --workload quadratic (consensus has no steps)", used.front()));
  }
  if (!o.changes.empty()) {
    refuse(
        fmt::format("{} with --fail / --join is not supported (what a failure does to the "
                    "optimizer's state is not defined)",
                    used.front()));
  }
  if (p.momentum_kind == MomentumKind::quasi_global && !(p.momentum > 0.0)) {
    refuse("--momentum-kind quasi-global needs --momentum B (0 < B < 1)");
  }
  // gt filters the tracked direction by local momentum, as the peers do; the peers have no agt
  // and no quasi-global momentum with tracking (the tracker already is the global direction).
  if (p.gradient_tracking && p.momentum > 0.0 &&
      (o.mode == Mixing::async || p.momentum_kind == MomentumKind::quasi_global)) {
    refuse(fmt::format(
        "--momentum{} with --algo {}: not defined (gt takes local momentum only)",
        p.momentum_kind == MomentumKind::quasi_global ? " --momentum-kind quasi-global" : "",
        algorithm_name(o)));
  }
  if (p.global_average_every > 0 && o.mode == Mixing::async) {
    refuse(
        fmt::format("--global-average-every with --algo {}: an exact average needs a "
                    "synchronous round (use --algo sgp)",
                    algorithm_name(o)));
  }
  if (p.global_average_every > 0 && p.gradient_tracking) {
    refuse("--global-average-every with --algo gt is not defined (use --algo sgp)");
  }
  if (p.slow_momentum && p.global_average_every == 0) {
    refuse("--slow-momentum needs --global-average-every H (it steps at the exact averages)");
  }
  if (!(o.lr > 0.0) && (p.slow_momentum || p.momentum_kind == MomentumKind::quasi_global)) {
    refuse(fmt::format("{} needs --lr > 0 (its rule divides by lr)",
                       p.slow_momentum ? "--slow-momentum" : "--momentum-kind quasi-global"));
  }
}

std::size_t row_width(const SimulationOptions& options) {
  return options.optimizer.gradient_tracking ? 2 * options.dim : options.dim;
}

std::size_t state_bytes(const topology::Schedule& schedule, const SimulationOptions& options) {
  if (options.compressor) {
    // x, the public copies and the next x in double.
    return 3 * static_cast<std::size_t>(schedule.num_peers()) * options.dim * sizeof(double);
  }
  const bool async = options.mode == Mixing::async;
  const std::size_t value = async ? sizeof(double) : sizeof(float);
  const std::size_t mixing =
      async ? AsyncPopulation::bytes_needed(schedule, row_width(options))
            : 2 * static_cast<std::size_t>(schedule.num_peers()) * row_width(options) * value;
  // The optimizer's per-peer vectors: the tracked gradient, the momentum buffer, z_before.
  const auto& p = options.optimizer;
  std::size_t vectors = p.gradient_tracking ? 1 : 0;
  if (p.momentum > 0.0) vectors += p.momentum_kind == MomentumKind::quasi_global ? 2 : 1;
  return mixing + vectors * static_cast<std::size_t>(schedule.num_peers()) * options.dim * value;
}

void require_fits_in_memory(const topology::Schedule& schedule, const SimulationOptions& options) {
  const std::size_t need = state_bytes(schedule, options);
  const std::size_t have = physical_memory();
  if (need > have / 10 * 9) {
    throw InputError(fmt::format(
        "sgp simulate: {} peers x --dim {} in {} mode need {:.1f} GiB of state, more than this "
        "machine's {:.1f} GiB{}; use fewer peers or a smaller --dim",
        schedule.num_peers(), options.dim, options.mode == Mixing::sync ? "sync" : "async",
        static_cast<double>(need) / (1 << 30), static_cast<double>(have) / (1 << 30),
        options.mode == Mixing::async ? " (async keeps 4 x dim doubles per directed edge)" : ""));
  }
}

SimulationResult simulate(const topology::Schedule& schedule, const SimulationOptions& options,
                          const std::function<void(const RoundRecord&)>& on_record) {
  SGP_ENFORCE(
      options.rounds >= 1 && options.dim >= 1 && options.threads >= 1 && options.log_every >= 1,
      "bad simulation options");
  SGP_ENFORCE(options.mode == Mixing::async || !options.faults.any(),
              "link faults need the async mode");
  require_valid_optimizer(options);
  require_fits_in_memory(schedule, options);
  if (options.compressor) return run_compressed(schedule, options, on_record);
  return options.mode == Mixing::sync ? run_sync(schedule, options, on_record)
                                      : run_async(schedule, options, on_record);
}

}  // namespace sgp::simulate
