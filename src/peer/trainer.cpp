#include "sgp/peer/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <thread>
#include <utility>

#if defined(__GLIBC__)
#include <malloc.h>  // malloc_trim
#endif

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "sgp/compute/device_buffer.hpp"
#include "sgp/config/algorithm.hpp"
#include "sgp/config/engine_settings.hpp"
#include "sgp/config/run_length.hpp"
#include "sgp/config/settings.hpp"
#include "sgp/config/straggler.hpp"
#include "sgp/data/partition.hpp"
#include "sgp/data/sharding.hpp"
#include "sgp/endpoint.hpp"
#include "sgp/error.hpp"
#include "sgp/gossip/mixer.hpp"
#include "sgp/model/evaluator.hpp"
#include "sgp/model/lr_schedule.hpp"
#include "sgp/model/network.hpp"
#include "sgp/model/sgd.hpp"
#include "sgp/optim/update_rule.hpp"
#include "sgp/peer/batch_loader.hpp"
#include "sgp/peer/checkpoint_store.hpp"
#include "sgp/peer/progress.hpp"
#include "sgp/peer/resume_agreement.hpp"
#include "sgp/peer/resume_settings.hpp"
#include "sgp/peer/work_plan.hpp"
#include "sgp/run/file_names.hpp"
#include "sgp/run/peak_rss.hpp"
#include "sgp/run/percentiles.hpp"
#include "sgp/run/run_directory.hpp"

namespace sgp::peer {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

model::LrScheduleOptions lr_options(const config::TrainConfig& c, int num_peers,
                                    std::int64_t per_epoch, std::int64_t total) {
  model::LrScheduleOptions o;
  o.base_lr = c.lr_scaling == model::LrScaling::linear
                  ? model::linearly_scaled_lr(c.lr, std::int64_t{c.batch_size} * num_peers)
                  : c.lr;
  o.warmup_iterations = std::llround(c.warmup_epochs * static_cast<double>(per_epoch));
  o.decay = c.lr_decay;
  for (double epoch : c.lr_milestones) {
    o.milestones.push_back(std::llround(epoch * static_cast<double>(per_epoch)));
  }
  o.gamma = c.lr_gamma;
  o.total_iterations = total;
  return o;
}

// Every peer's shard (the same split on every peer); rank 0 records their label histograms in
// partition.json.
std::vector<std::vector<std::size_t>> partition(const config::TrainConfig& c, int rank,
                                                int num_peers, const data::Dataset& train,
                                                run::RunDirectory& run) {
  auto parts = training_shards(c, num_peers, train);
  if (rank == 0) {
    nlohmann::json peers = nlohmann::json::array();
    for (int r = 0; r < num_peers; ++r) {
      peers.push_back(
          {{"rank", r},
           {"samples", parts[r].size()},
           {"label_counts", data::label_histogram(train.labels, train.num_classes, parts[r])}});
    }
    run.write_json(run::kPartitionFile,
                   {{"partition", c.partition}, {"seed", c.seed}, {"peers", peers}});
  }
  return parts;
}

}  // namespace

struct Trainer::State {
  const config::TrainConfig& config;
  int rank, num_peers;
  compute::Backend& backend;
  run::RunDirectory& run;
  Communication comm;
  model::Network net;
  optim::StateLayout layout;                 // what x holds besides the parameters
  std::vector<std::int64_t> label_counts;    // of this peer's shard
  compute::DeviceBuffer<float> x, z, grads;  // push-sum numerator (and more state), z, gradient
  model::Sgd sgd;
  optim::UpdateRule rule;
  data::BatchSampler sampler;
  BatchLoader loader;
  model::Evaluator evaluator;
  std::int64_t per_epoch, total;
  model::LrSchedule lr;
  // --resume with gossip: the transport the peers agree on the iteration over, which hands the
  // engine what arrived meanwhile.
  std::unique_ptr<transport::ReplayTransport> replay;
  std::unique_ptr<gossip::Mixer> engine;
  gossip::MembershipControl* group = nullptr;  // the engine's, when peers may join and leave
  gossip::SampleBudget* budget = nullptr;      // the engine's, with --work budget
  std::optional<WorkPlan> plan;                // what the lr, evaluations and the end follow
  std::optional<CheckpointStore> checkpoints;
  std::optional<std::int64_t> resume_at;  // --resume: the iteration all peers have (none: start)
  config::StragglerSpec straggler;

  State(const config::TrainConfig& c, int r, int n, compute::Backend& b, const data::Dataset& tr,
        const data::Dataset& te, run::RunDirectory& rd, Communication cm)
      : config(c),
        rank(r),
        num_peers(n),
        backend(b),
        run(rd),
        comm(std::move(cm)),
        net(b, model::parse_model_spec(c.model), model::input_shape(tr), tr.num_classes,
            c.batch_size),
        layout(optim::state_layout(c, net.parameter_count())),
        x(b, layout.total),
        z(b, comm.schedule ? layout.mixed : 0),
        grads(b, net.parameter_count()),
        sgd(b, net.parameter_count(), {c.momentum, c.weight_decay, c.nesterov}),
        rule(c, b, layout, x.data(), sgd),
        sampler(std::move(partition(c, r, n, tr, rd)[r]), c.batch_size, c.seed + 1 + r),
        loader(b, tr, c.batch_size),
        evaluator(b, model::parse_model_spec(c.model), te),
        per_epoch(config::iterations_per_epoch(tr.size(), n, c.batch_size)),
        total(config::total_iterations(c, per_epoch)),
        lr(lr_options(c, n, per_epoch, total)),
        straggler(config::parse_straggler_spec(c.straggler)) {
    if (c.sign_flip_rank >= n) {
      throw InputError(
          fmt::format("--sign-flip-rank {}: not a rank of a run of {} peers", c.sign_flip_rank, n));
    }
    if (straggler.rank >= n) {
      throw InputError(fmt::format("--straggler {}: rank {} is not in a run of {} peers",
                                   c.straggler, straggler.rank, n));
    }
    x.upload(net.initial_parameters(c.seed));
    rule.start();
    label_counts = data::label_histogram(tr.labels, tr.num_classes, sampler.shard());
    if (c.checkpoint_every > 0 || c.resume) {
      checkpoints.emplace(rd.path() / run::kCheckpointDir, r, rd.run_id(),
                          resume_settings(c, n, comm.schedule));
    }
    if (comm.schedule) {
      SGP_ENFORCE(comm.transport != nullptr, "a schedule needs a transport");
      if (c.resume) {
        replay = std::make_unique<transport::ReplayTransport>(*comm.transport);
        comm.transport = replay.get();
      }
    }
    // Before the engine exists: osgp's receives on its own thread from the start.
    if (c.resume) resume_at = newest_resumable();
    if (comm.schedule) start_engine();
    plan.emplace(total, config::evaluation_interval(c, per_epoch), group_batch(), budget);
  }

  std::int64_t group_batch() const { return std::int64_t{config.batch_size} * num_peers; }

  void start_engine() {
    gossip::PushSumConfig gc = config::push_sum_config(
        config, rank, backend.kind(), config::overlap_comm_thread(config, *comm.schedule, rank));
    if (config.work == config::Work::budget) {
      gc.sample_budget = WorkPlan::sample_budget(total, group_batch());
    }
    engine =
        gossip::make_mixer(backend, *comm.schedule, *comm.transport, x.data(), layout.mixed, gc);
    group = engine->membership_control();
    budget = engine->sample_budget();
    SGP_ENFORCE((budget != nullptr) == (gc.sample_budget > 0), "{}'s engine has no sample budget",
                name_of(config.algo));
    rule.set_engine(engine.get());
  }

  // z = x / w, the de-biased parameters that are evaluated and saved: x itself without gossip.
  // With w exactly 1 (every doubly-stochastic schedule keeps it there) z = x bit for bit, so the
  // pass over the parameters is skipped. x is never in flight outside mix().
  const float* debiased() {
    if (!engine || engine->weight() == 1.0) return x.data();
    engine->debias(z.data());
    return z.data();
  }

  // What the step's gradient is taken at: x with the scale that makes it z (1 / w for push-sum,
  // folded into each layer: no pass writes z; the network refuses a scale that is not positive
  // and finite), or z written by the engine where it must be.
  std::pair<const float*, float> step_parameters() {
    const auto scale = engine ? engine->z_scale() : std::optional<double>(1.0);
    if (scale) return {x.data(), static_cast<float>(*scale)};
    if (const float* z_itself = engine->trainable_z()) return {z_itself, 1.0f};
    return {debiased(), 1.0f};
  }

  // After the last step: the gradient, and the momentum unless a checkpoint still saves it. An
  // asgp peer's memory peaked in finish(), where settling keeps a float64 copy of the model and
  // pushes are float64 (5.4 MB each for W1): 8 W1 peers peaked 5 to 15 MiB above their training
  // plateau, at 87 to 95 MiB; with these returned to the system, at the plateau, 76 to 85.
  void release_training_buffers() {
    grads = compute::DeviceBuffer<float>(backend, 0);
    if (!(checkpoints && config.checkpoint_every > 0)) {
      sgd.velocity() = compute::DeviceBuffer<float>(backend, 0);
    }
#if defined(__GLIBC__)
    malloc_trim(0);  // freed in the middle of the heap, they stay resident otherwise
#endif
  }

  void save_checkpoint(std::int64_t iteration) {
    if (engine) engine->finish();  // overlap mode: no mass in flight
    CheckpointState s;
    s.iteration = iteration;
    s.epoch = sampler.epoch();
    s.position = sampler.position();
    s.weight = engine ? engine->weight() : 1.0;
    s.x = x.to_host();
    s.velocity = sgd.velocity().to_host();
    checkpoints->save(s);
  }

  // asgp, sgp peer --join: a sponsor's half of its mass and its iteration; returns that.
  std::int64_t join() {
    SGP_ENFORCE(group != nullptr, "--join needs an algorithm whose peers may join");
    const std::int64_t iteration = std::min(total, group->join() * config.gossip_every);
    const auto position = static_cast<std::size_t>(iteration % per_epoch) *
                          static_cast<std::size_t>(config.batch_size);
    sampler.seek(static_cast<int>(iteration / per_epoch),
                 std::min(position, sampler.shard().size()));
    spdlog::info("joined at iteration {}", iteration);
    return iteration;
  }

  // The newest iteration every rank has a checkpoint of: agreed with the other peers when they
  // gossip (each may see only its own files), else what the directory holds.
  std::optional<std::int64_t> newest_resumable() {
    if (replay) {
      return agree_resume_iteration(*replay, *comm.schedule, rank, checkpoints->available(),
                                    std::chrono::milliseconds(config.timeout_ms));
    }
    return latest_complete_checkpoint(checkpoints->dir(), num_peers, run.run_id());
  }

  // Returns the iteration to start from.
  std::int64_t resume() {
    const auto newest = resume_at;
    if (!newest) {
      if (!checkpoints->available().empty()) {
        throw InputError(
            fmt::format("--resume: {} has checkpoints of this peer but no set that "
                        "every one of the {} peers finished",
                        checkpoints->dir().string(), num_peers));
      }
      spdlog::info("--resume: no checkpoint in {}; starting from the beginning",
                   checkpoints->dir().string());
      return 0;
    }
    const CheckpointState s = checkpoints->load(*newest, net.parameter_count(), x.size());
    if (s.epoch > std::numeric_limits<int>::max() || s.position > sampler.shard().size()) {
      throw InputError(fmt::format(
          "damaged checkpoint {}: data position epoch {} sample {} is beyond this peer's {} "
          "samples",
          checkpoints->file(*newest).string(), s.epoch, s.position, sampler.shard().size()));
    }
    x.upload(s.x);
    sgd.velocity().upload(s.velocity);
    rule.resumed();
    sampler.seek(static_cast<int>(s.epoch), s.position);
    if (engine) engine->restore(s.iteration / config.gossip_every, s.weight);
    spdlog::info("resumed from iteration {} (push-sum weight {})", s.iteration, s.weight);
    return s.iteration;
  }
};

Trainer::Trainer(const config::TrainConfig& config, int rank, int num_peers,
                 compute::Backend& backend, const data::Dataset& train, const data::Dataset& test,
                 run::RunDirectory& run, Communication communication) {
  config::validate(config);
  state_ = std::make_unique<State>(config, rank, num_peers, backend, train, test, run,
                                   std::move(communication));
}

Trainer::~Trainer() = default;

// What the loop accumulates between two records of peer-<rank>.jsonl, and over the whole run.
struct Trainer::Tally {
  double window_loss = 0.0, last_loss = 0.0;
  double compute_seconds = 0.0, comm_seconds = 0.0;  // since the last record
  std::int64_t window_count = 0, samples = 0;
  std::vector<double> iteration_seconds;
  model::Evaluation last_eval;
  bool evaluated = false;                          // last_eval is a real evaluation
  gossip::PushSumMetrics before;                   // engine metrics at the last record
  std::optional<std::int64_t> joined_at, left_at;  // asgp
};

// One iteration: gradient at z, optimizer step on x, then a gossip round when one is due.
double Trainer::step(std::int64_t it, Tally& t) {
  State& s = *state_;
  const auto step_start = Clock::now();
  const int batch = s.loader.load(s.sampler.next());
  const auto [params, scale] = s.step_parameters();
  s.net.queue_forward_backward(params, s.loader.images(), s.loader.labels(), batch, s.grads.data(),
                               scale);
  const double lr = s.lr.at(s.plan->schedule_iteration(it));
  s.rule.local_step(s.grads.data(), scale, static_cast<float>(lr));
  // Read after the whole step is queued (GPU: one wait per step). A non-finite loss stops the run
  // before x, now stepped with a non-finite gradient, is mixed, logged or saved.
  const double loss = s.backend.queued_loss();
  if (!std::isfinite(loss)) {
    throw InputError(fmt::format(
        "training diverged at iteration {}: loss is {} (try a smaller --lr or a --warmup-epochs)",
        it, loss));
  }
  if (s.straggler.applies_to(s.rank)) {  // sleeps: the host's other peers keep its CPU
    std::this_thread::sleep_for(config::straggler_pause(s.straggler, Clock::now() - step_start));
  }
  const auto computed = Clock::now();
  t.compute_seconds += std::chrono::duration<double>(computed - step_start).count();
  t.samples += batch;
  if (s.budget) s.budget->count_samples(t.samples);  // before the round, which tells the others
  s.rule.mix(it);
  t.comm_seconds += seconds_since(computed);
  t.iteration_seconds.push_back(seconds_since(step_start));
  t.window_loss += loss;
  ++t.window_count;
  return lr;
}

// Training rows come every --log-every iterations (and at the end), whatever the evaluations
// do: an evaluation between two is a row of its own, with only its test fields.
void Trainer::record(std::int64_t it, double lr, std::optional<std::int64_t> eval, bool training,
                     bool last, double wall, Tally& t) {
  State& s = *state_;
  nlohmann::json record = {
      {"iteration", it + 1},
      {"epoch", static_cast<double>(it + 1) / static_cast<double>(s.per_epoch)},
      {"wall_time", wall},
  };
  if (training) add_training_fields(record, lr, last, t);
  if (eval && (!last || s.config.final_eval)) {
    add_evaluation(record, *eval, last, t);
  } else if (eval) {  // --no-final-eval: the monitor still gets the final model
    send_snapshot(*eval, last, s.debiased());
    t.evaluated = false;  // an earlier evaluation is not of the final model
  }
  s.run.log(record);
}

void Trainer::add_training_fields(nlohmann::json& record, double lr, bool last, Tally& t) {
  State& s = *state_;
  t.last_loss = t.window_loss / static_cast<double>(t.window_count);
  record["interval"] = t.window_count;  // iterations the fields below cover
  record["loss"] = t.last_loss;
  record["lr"] = lr;
  record["compute_s"] = t.compute_seconds;
  if (s.engine) {
    if (last) {  // overlap: apply every message still in flight; asgp: mix until all are done
      const auto finishing = Clock::now();
      s.release_training_buffers();
      s.engine->finish();
      t.comm_seconds += seconds_since(finishing);
    }
    const auto m = s.engine->metrics();
    const double wait = m.wait_seconds - t.before.wait_seconds;
    record["weight"] = s.engine->weight();
    record["bytes_sent"] = m.bytes_sent - t.before.bytes_sent;
    record["bytes_received"] = m.bytes_received - t.before.bytes_received;
    record["wait_s"] = wait;
    if (config::info(s.config.algo).mode == gossip::Mode::async) {  // of wait_s, keeping step
      record["partner_wait_s"] = m.partner_wait_seconds - t.before.partner_wait_seconds;
    }
    record["communication_s"] = t.comm_seconds - wait;
    // communication_s, split: staging copies, checksums and sends (overlap: queuing only), and
    // checking, uploading and adding what arrived.
    record["send_s"] = m.send_seconds - t.before.send_seconds;
    record["apply_s"] = m.apply_seconds - t.before.apply_seconds;
    record["rejected_messages"] = m.rejected_total();
    t.before = m;
  }
  t.window_loss = 0.0;
  t.window_count = 0;
  t.compute_seconds = t.comm_seconds = 0.0;
}

// The test accuracy of z, handed to the monitor too.
// `of`: the iteration it is of for the monitor (this peer's, or the group's under a budget).
void Trainer::add_evaluation(nlohmann::json& record, std::int64_t of, bool last, Tally& t) {
  State& s = *state_;
  const float* z = s.debiased();
  gossip::Mixer* engine = s.engine.get();
  // (A throw leaves the pause unended: the peer is going down, and its notice lapses by itself.)
  if (engine) engine->begin_pause();
  t.last_eval = s.evaluator.evaluate(z, [engine] {
    if (engine) engine->stay_heard();
  });
  if (engine) engine->end_pause();
  t.evaluated = true;
  record["test_accuracy"] = t.last_eval.accuracy;
  record["test_loss"] = t.last_eval.loss;
  send_snapshot(of, last, z);
}

// The model z at an evaluation point, to the run's monitor (sgp launch) where there is one.
void Trainer::send_snapshot(std::int64_t of, bool last, const float* z) {
  State& s = *state_;
  if (!s.comm.snapshot) return;
  std::vector<float> host(s.net.parameter_count());
  s.backend.download(host.data(), z, host.size() * sizeof(float));
  s.comm.snapshot(of, last, host, s.engine ? s.engine->weight() : 1.0);
}

run::PeerSummary Trainer::summary(const Tally& t, double wall) const {
  const State& s = *state_;
  const auto times = run::percentiles(t.iteration_seconds, 20);
  double train_seconds = 0.0;
  for (double seconds : t.iteration_seconds) train_seconds += seconds;
  run::PeerSummary summary;
  summary.rank = s.rank;
  summary.peers = s.num_peers;
  summary.algo = name_of(s.config.algo);
  summary.update_rule = optim::describe_update_rule(s.config);
  summary.device = s.backend.describe();
  summary.model = s.config.model;
  summary.parameters = static_cast<std::int64_t>(s.net.parameter_count());
  summary.partition = s.config.partition;
  summary.label_counts = s.label_counts;
  summary.iterations = s.total;
  summary.epochs = static_cast<double>(s.total) / static_cast<double>(s.per_epoch);
  summary.samples = t.samples;
  if (s.plan->budgeted()) {
    summary.sample_budget = WorkPlan::sample_budget(s.total, s.group_batch());
    summary.own_iterations = static_cast<std::int64_t>(t.iteration_seconds.size());
  }
  summary.final_train_loss = t.last_loss;
  if (t.evaluated) {
    summary.final_test_accuracy = t.last_eval.accuracy;
    summary.final_test_loss = t.last_eval.loss;
  }
  summary.median_iteration_ms = 1e3 * times.median;
  summary.p90_iteration_ms = 1e3 * times.p90;
  summary.mean_iteration_ms = 1e3 * times.mean;
  summary.samples_per_second = static_cast<double>(t.samples) / train_seconds;
  summary.wall_time_s = wall;
  summary.peak_rss_bytes = run::peak_rss_bytes();
  if (s.engine) {
    const auto m = s.engine->metrics();
    const auto iterations = std::max<std::size_t>(1, t.iteration_seconds.size());
    summary.weight = s.engine->weight();
    summary.bytes_sent_per_iteration =
        static_cast<double>(m.bytes_sent) / static_cast<double>(iterations);
    summary.rejected_messages = m.rejected_total();
    for (const auto& suspect : m.suspects) {
      summary.suspected_peers.push_back({suspect.rank, s.rank, suspect.round, suspect.distance,
                                         suspect.reference, suspect.own_norm,
                                         std::string(name_of(s.config.robust))});
    }
    if (s.config.robust != gossip::Robust::none) {
      summary.clipped_contributions = m.clipped_messages;
    }
    if (config::info(s.config.algo).mode == gossip::Mode::async) {
      summary.partner_wait_s = m.partner_wait_seconds;
      summary.skipped_pushes = m.skipped_sends;
      summary.resent_pushes = m.resent_pushes;
      summary.held_rounds = m.held_rounds;
    }
  }
  if (s.group) {
    for (const auto& e : s.group->events())
      if (e.what == "excluded") {
        summary.excluded_peers.push_back(e.rank);
        summary.excluded_at_round.push_back(e.round);
      }
  }
  summary.joined_at_iteration = t.joined_at;
  summary.left_at_iteration = t.left_at;
  if (!s.config.final_eval) summary.final_eval = false;
  return summary;
}

run::ModelFile Trainer::trained_model() {
  State& s = *state_;
  run::ModelFile out{s.config.model, std::vector<float>(s.net.parameter_count())};
  s.backend.download(out.parameters.data(), s.debiased(), out.parameters.size() * sizeof(float));
  return out;
}

run::PeerSummary Trainer::run() {
  State& s = *state_;
  const config::TrainConfig& c = s.config;
  const std::int64_t start_iteration = s.comm.join ? s.join() : c.resume ? s.resume() : 0;
  Tally t;
  if (s.comm.join) t.joined_at = start_iteration;
  spdlog::info("model {}", s.net.describe());
  spdlog::info("training {} parameters on {}: {} iterations ({} per epoch), batch {}{}",
               s.net.parameter_count(), s.backend.describe(), s.total, s.per_epoch, c.batch_size,
               s.engine ? fmt::format(", {} with {} peers", name_of(c.algo), s.num_peers) : "");
  Progress progress(fmt::format("rank {}", s.rank), s.total);
  t.iteration_seconds.reserve(static_cast<std::size_t>(s.total));
  // A resumed run's log continues from its checkpoint: later records are written again.
  const double earlier_wall = c.resume && !s.comm.join ? s.run.rewind_log(start_iteration) : 0.0;
  // Under a budget every peer starts counting together (a joiner finds the others counting).
  if (s.budget && !s.comm.join) s.budget->await_all_started();
  // Records cover the iterations: waits before the first (a join, the start under a budget) are
  // not the first record's communication (its communication_s came out at -5.9 s).
  if (s.engine) t.before = s.engine->metrics();
  const auto start = Clock::now();
  auto wall = [&] { return earlier_wall + seconds_since(start); };
  // Per peer: `total` iterations. Under a budget: until the group has spent it (at least one).
  for (std::int64_t it = start_iteration; it < s.total || s.plan->budgeted(); ++it) {
    if (s.group && s.comm.leave_requested && s.comm.leave_requested->load()) {
      s.group->leave();
      t.left_at = it;
      spdlog::info("left at iteration {}", it);
      break;
    }
    const double lr = step(it, t);
    const bool last = s.plan->last(it);
    const auto eval = s.plan->evaluation(it, last);
    const bool training_row = last || (it + 1) % c.log_every == 0;
    if (eval || training_row) record(it, lr, eval, training_row, last, wall(), t);
    if (s.checkpoints && c.checkpoint_every > 0 && ((it + 1) % c.checkpoint_every == 0 || last)) {
      s.save_checkpoint(it + 1);
    }
    progress.update(s.plan->done_after(it), fmt::format("loss {:.4f}  acc {:.2f}%", t.last_loss,
                                                        100.0 * t.last_eval.accuracy));
    if (last) break;
  }
  progress.finish(t.evaluated ? fmt::format("test accuracy {:.2f}%", 100.0 * t.last_eval.accuracy)
                              : std::string("no final evaluation"));
  return summary(t, wall());
}

}  // namespace sgp::peer
