#include "sgp/peer/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "sgp/compute/device_buffer.hpp"
#include "sgp/data/sharding.hpp"
#include "sgp/error.hpp"
#include "sgp/model/lr_schedule.hpp"
#include "sgp/model/mlp.hpp"
#include "sgp/model/sgd.hpp"
#include "sgp/peer/batch_loader.hpp"
#include "sgp/peer/evaluator.hpp"
#include "sgp/peer/progress.hpp"
#include "sgp/peer/run_directory.hpp"

namespace sgp::peer {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::vector<int> layer_widths(const TrainConfig& config, const data::Dataset& train) {
  std::vector<int> widths = {train.features()};
  widths.insert(widths.end(), config.hidden.begin(), config.hidden.end());
  widths.push_back(train.num_classes);
  return widths;
}

model::LrScheduleOptions lr_options(const TrainConfig& c, int num_peers,
                                    std::int64_t per_epoch, std::int64_t total) {
  model::LrScheduleOptions o;
  if (c.lr_scaling == "linear") {
    o.base_lr = model::linearly_scaled_lr(c.lr, static_cast<std::int64_t>(c.batch_size) * num_peers);
  } else if (c.lr_scaling == "none") {
    o.base_lr = c.lr;
  } else {
    throw InputError(fmt::format("--lr-scaling: '{}' is not a rule (expected none or linear)",
                                 c.lr_scaling));
  }
  o.warmup_iterations = std::llround(c.warmup_epochs * static_cast<double>(per_epoch));
  o.decay = model::parse_lr_decay(c.lr_decay);
  for (double epoch : c.lr_milestones) {
    o.milestones.push_back(std::llround(epoch * static_cast<double>(per_epoch)));
  }
  o.gamma = c.lr_gamma;
  o.total_iterations = total;
  return o;
}

std::int64_t total_iterations(const TrainConfig& c, std::int64_t per_epoch) {
  auto total = std::max<std::int64_t>(1, std::llround(c.epochs * static_cast<double>(per_epoch)));
  return c.max_iterations > 0 ? std::min(total, c.max_iterations) : total;
}

}  // namespace

std::int64_t iterations_per_epoch(std::size_t train_size, int num_peers, int batch_size) {
  const auto global_batch = static_cast<std::size_t>(num_peers) * batch_size;
  return static_cast<std::int64_t>((train_size + global_batch - 1) / global_batch);
}

Percentiles percentiles(std::vector<double> values, std::size_t skip) {
  if (values.size() > skip) values.erase(values.begin(), values.begin() + skip);
  if (values.empty()) return {};
  auto at = [&values](double q) {
    const auto k = static_cast<std::size_t>(q * static_cast<double>(values.size() - 1) + 0.5);
    std::nth_element(values.begin(), values.begin() + k, values.end());
    return values[k];
  };
  return {at(0.5), at(0.9)};
}

struct Trainer::State {
  const TrainConfig& config;
  int rank, num_peers;
  compute::Backend& backend;
  const data::Dataset& train;
  RunDirectory& run;
  model::Mlp mlp;
  compute::DeviceBuffer<float> params, grads;
  model::Sgd sgd;
  data::BatchSampler sampler;
  BatchLoader loader;
  Evaluator evaluator;
  std::int64_t per_epoch, total;
  model::LrSchedule lr;

  State(const TrainConfig& c, int r, int n, compute::Backend& b, const data::Dataset& tr,
        const data::Dataset& te, RunDirectory& rd)
      : config(c), rank(r), num_peers(n), backend(b), train(tr), run(rd),
        mlp(b, layer_widths(c, tr), c.batch_size),
        params(b, mlp.parameter_count()),
        grads(b, mlp.parameter_count()),
        sgd(b, mlp.parameter_count(), {c.momentum, c.weight_decay, c.nesterov}),
        sampler(data::make_shards(tr.size(), n, c.seed)[r], c.batch_size, c.seed + 1 + r),
        loader(b, tr, c.batch_size),
        evaluator(b, layer_widths(c, tr), te),
        per_epoch(iterations_per_epoch(tr.size(), n, c.batch_size)),
        total(total_iterations(c, per_epoch)),
        lr(lr_options(c, n, per_epoch, total)) {
    const auto initial = mlp.initial_parameters(c.seed);
    params.upload(initial);
  }
};

Trainer::Trainer(const TrainConfig& config, int rank, int num_peers, compute::Backend& backend,
                 const data::Dataset& train, const data::Dataset& test, RunDirectory& run) {
  if (config.batch_size < 1) {
    throw InputError(fmt::format("--batch-size: must be at least 1, got {}", config.batch_size));
  }
  if (!(config.epochs > 0.0)) {
    throw InputError(fmt::format("--epochs: must be positive, got {}", config.epochs));
  }
  for (int width : config.hidden) {
    if (width < 1) throw InputError(fmt::format("--hidden: widths must be >= 1, got {}", width));
  }
  state_ = std::make_unique<State>(config, rank, num_peers, backend, train, test, run);
}

Trainer::~Trainer() = default;

nlohmann::json Trainer::run() {
  State& s = *state_;
  const TrainConfig& c = s.config;
  const std::int64_t eval_every = std::max<std::int64_t>(
      1, std::llround(c.eval_every_epochs * static_cast<double>(s.per_epoch)));
  spdlog::info("training {} parameters on {}: {} iterations ({} per epoch), batch {}",
               s.mlp.parameter_count(), s.backend.describe(), s.total, s.per_epoch,
               c.batch_size);

  Progress progress("train", s.total);
  std::vector<double> iteration_seconds;
  iteration_seconds.reserve(static_cast<std::size_t>(s.total));
  double window_loss = 0.0, last_loss = 0.0;
  std::int64_t window_count = 0, samples = 0;
  Evaluation last_eval;
  const auto start = Clock::now();

  for (std::int64_t it = 0; it < s.total; ++it) {
    const auto step_start = Clock::now();
    const int batch = s.loader.load(s.sampler.next());
    const double loss = s.mlp.forward_backward(s.params.data(), s.loader.images(),
                                               s.loader.labels(), batch, s.grads.data());
    if (!std::isfinite(loss)) {
      throw InputError(fmt::format("training diverged at iteration {}: loss is {} (try a "
                                   "smaller --lr or a --warmup-epochs)",
                                   it, loss));
    }
    const double lr = s.lr.at(it);
    s.sgd.step(s.params.data(), s.grads.data(), static_cast<float>(lr));
    s.backend.synchronize();
    iteration_seconds.push_back(seconds_since(step_start));
    samples += batch;
    window_loss += loss;
    ++window_count;

    const bool last = it + 1 == s.total;
    const bool eval = last || (it + 1) % eval_every == 0;
    if (eval || last || (it + 1) % c.log_every == 0) {
      last_loss = window_loss / static_cast<double>(window_count);
      nlohmann::json record = {
          {"iteration", it + 1},
          {"epoch", static_cast<double>(it + 1) / static_cast<double>(s.per_epoch)},
          {"wall_time", seconds_since(start)},
          {"loss", last_loss},
          {"lr", lr},
      };
      if (eval) {
        last_eval = s.evaluator.evaluate(s.params.data());
        record["test_accuracy"] = last_eval.accuracy;
        record["test_loss"] = last_eval.loss;
      }
      s.run.log(record);
      window_loss = 0.0;
      window_count = 0;
    }
    progress.update(it + 1, fmt::format("loss {:.4f}  acc {:.2f}%", last_loss,
                                        100.0 * last_eval.accuracy));
  }
  const double wall = seconds_since(start);
  progress.finish(fmt::format("test accuracy {:.2f}%", 100.0 * last_eval.accuracy));

  const auto times = percentiles(iteration_seconds, 20);
  double train_seconds = 0.0;
  for (double t : iteration_seconds) train_seconds += t;
  nlohmann::json summary = {
      {"rank", s.rank},
      {"peers", s.num_peers},
      {"device", s.backend.describe()},
      {"parameters", s.mlp.parameter_count()},
      {"iterations", s.total},
      {"epochs", static_cast<double>(s.total) / static_cast<double>(s.per_epoch)},
      {"final_train_loss", last_loss},
      {"final_test_accuracy", last_eval.accuracy},
      {"final_test_loss", last_eval.loss},
      {"median_iteration_ms", 1e3 * times.median},
      {"p90_iteration_ms", 1e3 * times.p90},
      // Throughput of the training steps alone (no evaluation), for benchmarks.
      {"samples_per_second", static_cast<double>(samples) / train_seconds},
      {"wall_time_s", wall},
  };
  s.run.write_json("summary.json", summary);
  return summary;
}

}  // namespace sgp::peer
