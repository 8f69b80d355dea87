#include "sgp/monitor/consensus_monitor.hpp"

#include <cmath>
#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "sgp/compute/device.hpp"
#include "sgp/config/run_length.hpp"
#include "sgp/error.hpp"
#include "sgp/gossip/wire_format.hpp"
#include "sgp/model/evaluator.hpp"
#include "sgp/model/model_spec.hpp"
#include "sgp/run/model_file.hpp"
#include "sgp/run/run_directory.hpp"
#include "sgp/transport/snapshot_channel.hpp"

namespace sgp::monitor {

using model::Evaluation;
using model::Evaluator;

namespace {

constexpr std::size_t kMaxPendingIterations = 8;
// An iteration still missing snapshots when this many newer ones have started is recorded with
// the snapshots it has: the missing peers died or left (asgp goes on without them), or are far
// behind.
constexpr std::size_t kPartialAfter = 4;
// A snapshot this many iterations beyond the newest record (before the first record: beyond the
// oldest pending iteration) is refused: no genuine run evaluates that rarely, and such snapshots
// would take the pending slots of the real iterations.
constexpr std::int64_t kMaxIterationsAhead = 1'000'000;

// Warnings for the count-th problem of a kind only when count is a power of two: a flood of
// snapshots costs a few log lines, each with the count so far.
void warn(std::uint64_t count, const std::string& what) {
  if ((count & (count - 1)) != 0) return;
  spdlog::warn("monitor: {} ({} so far; only the 2^k-th are logged)", what, count);
}

nlohmann::json or_null(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

}  // namespace

EvaluationPoints evaluation_points(const config::TrainConfig& c, int num_peers) {
  const auto train_size = data::fashion_mnist_size(data::resolve_data_dir(c.data_dir), "train");
  const std::int64_t per_epoch = config::iterations_per_epoch(train_size, num_peers, c.batch_size);
  return {config::evaluation_interval(c, per_epoch), config::total_iterations(c, per_epoch)};
}

MassModel mass_model_of(config::Algorithm algo) {
  const auto& a = config::info(algo);
  const bool lock_step = a.mode == gossip::Mode::sync || a.mode == gossip::Mode::allreduce;
  return !a.communicates || lock_step ? MassModel::conserved : MassModel::in_flight;
}

double relative_consensus_error(const std::vector<std::vector<float>>& z) {
  SGP_ENFORCE(!z.empty(), "no vectors");
  const std::size_t n = z.front().size();
  std::vector<double> mean(n, 0.0);
  for (const auto& v : z) {
    SGP_ENFORCE(v.size() == n, "vectors of sizes {} and {}", v.size(), n);
    for (std::size_t k = 0; k < n; ++k) mean[k] += v[k];
  }
  double norm = 0.0;
  for (auto& m : mean) {
    m /= static_cast<double>(z.size());
    norm += m * m;
  }
  double distance = 0.0;
  for (const auto& v : z)
    for (std::size_t k = 0; k < n; ++k) distance += (v[k] - mean[k]) * (v[k] - mean[k]);
  distance /= static_cast<double>(z.size());
  return norm > 0.0 ? distance / norm : distance;
}

ConsensusMonitor::ConsensusMonitor(const std::string& model, const std::string& data_dir,
                                   int num_peers, std::filesystem::path log, MassModel mass)
    : backend_(compute::make_backend({"cpu", 1, false})),
      test_(data::load_fashion_mnist(data::resolve_data_dir(data_dir), "t10k")),
      evaluator_(std::make_unique<Evaluator>(*backend_, model::parse_model_spec(model), test_)),
      parameter_count_(model::parameter_count(model::parse_model_spec(model),
                                              model::input_shape(test_), test_.num_classes)),
      num_peers_(num_peers),
      mass_(mass),
      log_(std::move(log)),
      model_(model) {}

ConsensusMonitor::ConsensusMonitor(int num_peers, std::filesystem::path log, MassModel mass)
    : parameter_count_(0), num_peers_(num_peers), mass_(mass), log_(std::move(log)) {}

ConsensusMonitor::~ConsensusMonitor() = default;

void ConsensusMonitor::explain_mismatch(const gossip::WireHeader& h, gossip::RejectCause cause) {
  if (mismatch_) return;
  if (cause == gossip::RejectCause::bad_size && h.total != parameter_count_ && !evaluator_) {
    mismatch_ = fmt::format(
        "rank {} sends snapshots of {} parameters, but the first snapshot had {}: every rank of "
        "the program must gossip the same model",
        h.sender, h.total, parameter_count_);
  } else if (cause == gossip::RejectCause::bad_size && h.total != parameter_count_) {
    mismatch_ = fmt::format(
        "rank {} sends snapshots of a model with {} parameters, but this monitor's model '{}' "
        "has {}: start it with the peers' settings (sgp monitor --config RUN_DIR/config.json, "
        "or the --model they were given)",
        h.sender, h.total, model_, parameter_count_);
  } else if (cause == gossip::RejectCause::unknown_sender && h.sender >= num_peers_) {
    mismatch_ = fmt::format(
        "a snapshot comes from rank {}, but this monitor expects {} peers (ranks 0..{}): start "
        "it with the peers' topology (--topology FILE, or --config RUN_DIR/config.json)",
        h.sender, num_peers_, num_peers_ - 1);
  }
  if (mismatch_) spdlog::error("monitor: {}", *mismatch_);
}

std::optional<MonitorRecord> ConsensusMonitor::add(transport::Message message) {
  std::optional<gossip::WireHeader> header;
  if (message.num_frames() == 2) header = gossip::parse_header(message.frame(0));
  // Consensus only: the first snapshot that decodes fixes the size (a snapshot is one chunk, so
  // its payload must hold all of it); the others must match it.
  const bool sizing = parameter_count_ == 0;
  if (sizing && header && header->total > 0 && header->count == header->total &&
      message.frame(1).size() == header->total * sizeof(float)) {
    parameter_count_ = header->total;
  }
  if (parameter_count_ == 0) {  // consensus only, and nothing that could fix the size yet
    ++rejected_;
    warn(rejected_, "rejected a snapshot: not one whole float32 vector");
    return std::nullopt;
  }
  // self = num_peers: every rank 0..N-1 is a valid sender to the monitor.
  auto decoded = gossip::decode_message(
      std::move(message), gossip::Chunking(parameter_count_, 0), num_peers_ + 1, num_peers_,
      gossip::kDtypeFloat32,
      mass_ == MassModel::conserved ? gossip::WeightBound::push_sum : gossip::WeightBound::finite);
  if (auto* cause = std::get_if<gossip::RejectCause>(&decoded)) {
    if (sizing) parameter_count_ = 0;  // a damaged or forged snapshot fixes nothing
    ++rejected_;
    if (header) explain_mismatch(*header, *cause);
    warn(rejected_, fmt::format("rejected a snapshot: {}", gossip::reject_cause_name(*cause)));
    return std::nullopt;
  }
  const auto& m = std::get<gossip::DecodedMessage>(decoded);
  const int rank = m.header.sender;
  const std::int64_t iteration = m.header.round;
  if (points_ && !points_->contains(iteration)) {
    ++rejected_;
    ++off_schedule_;
    warn(off_schedule_, fmt::format("rejected a snapshot of rank {} iteration {}: not an "
                                    "evaluation point of this run",
                                    rank, iteration));
    return std::nullopt;
  }
  if (rank >= num_peers_ || (!records_.empty() && iteration <= records_.back().iteration) ||
      far_ahead(iteration)) {
    ++rejected_;
    warn(rejected_, fmt::format("rejected a snapshot of rank {} iteration {}", rank, iteration));
    return std::nullopt;
  }
  // Bounded memory whatever arrives: only the newest few incomplete iterations are kept; every
  // snapshot given up is counted.
  pending_[iteration];
  while (pending_.size() > kMaxPendingIterations) {
    const auto oldest = pending_.begin();
    dropped_ += std::max<std::size_t>(oldest->second.size(), oldest->first == iteration ? 1 : 0);
    warn(dropped_,
         fmt::format("gave up iteration {} with {} of {} snapshots: {} newer ones are "
                     "incomplete",
                     oldest->first, oldest->second.size(), num_peers_, kMaxPendingIterations));
    pending_.erase(oldest);
  }
  const auto slot = pending_.find(iteration);
  if (slot == pending_.end()) return std::nullopt;  // older than every iteration kept
  auto& z = slot->second[rank];
  z.resize(parameter_count_);
  std::memcpy(z.data(), m.payload.data(), parameter_count_ * sizeof(float));
  weights_[iteration][rank] = m.header.weight;
  if (pending_.size() > kPartialAfter) return complete(pending_.begin()->first);
  if (pending_[iteration].size() < static_cast<std::size_t>(num_peers_)) return std::nullopt;
  return complete(iteration);
}

bool ConsensusMonitor::far_ahead(std::int64_t iteration) const {
  std::optional<std::int64_t> anchor;
  if (!records_.empty()) {
    anchor = records_.back().iteration;
  } else if (!pending_.empty()) {
    anchor = pending_.begin()->first;
  }
  return anchor && iteration - *anchor > kMaxIterationsAhead;
}

void ConsensusMonitor::flush() {
  while (!pending_.empty()) {
    if (pending_.begin()->second.empty()) {
      pending_.erase(pending_.begin());
    } else {
      complete(pending_.begin()->first);
    }
  }
}

MonitorRecord ConsensusMonitor::complete(std::int64_t iteration) {
  std::vector<std::vector<float>> z;
  for (auto& [rank, v] : pending_[iteration]) z.push_back(std::move(v));
  // Older iterations can no longer complete in order (a snapshot was dropped): give them up.
  for (auto it = pending_.begin(); it != pending_.end() && it->first < iteration; ++it) {
    dropped_ += it->second.size();
  }
  pending_.erase(pending_.begin(), pending_.upper_bound(iteration));

  MonitorRecord record;
  record.iteration = iteration;
  record.peers = static_cast<int>(z.size());
  for (const auto& [rank, w] : weights_[iteration]) record.sum_of_weights += w;
  weights_.erase(weights_.begin(), weights_.upper_bound(iteration));
  const double n = static_cast<double>(num_peers_);
  record.mass_drift = mass_ == MassModel::conserved && record.peers == num_peers_ &&
                      std::abs(record.sum_of_weights - n) > 1e-6 * n;
  if (record.mass_drift) {
    ++drift_records_;
    spdlog::warn("monitor: mass drift at iteration {}: the {} peers' weights sum to {:.9g}, not {}",
                 iteration, num_peers_, record.sum_of_weights, num_peers_);
  }

  record.consensus_error = relative_consensus_error(z);
  std::vector<float> mean(parameter_count_, 0.0f);
  for (std::size_t k = 0; k < parameter_count_; ++k) {
    double sum = 0.0;
    for (const auto& v : z) sum += v[k];
    mean[k] = static_cast<float>(sum / static_cast<double>(z.size()));
  }
  if (evaluator_) {
    compute::DeviceBuffer<float> average(*backend_, std::span<const float>(mean));
    average_ = mean;
    const Evaluation eval = evaluator_->evaluate(average.data());
    record.average_model_accuracy = eval.accuracy;
    record.average_model_loss = eval.loss;
  }
  records_.push_back(record);

  // The first record of this monitor: what the file holds from this iteration on comes from an
  // earlier attempt of a resumed run (its peers went back to a checkpoint), and is recorded again.
  if (records_.size() == 1) run::rewind_jsonl(log_, iteration - 1);
  std::ofstream out(log_, std::ios::app);
  out << nlohmann::json{{"iteration", record.iteration},
                        {"consensus_error", record.consensus_error},
                        {"average_model_accuracy", or_null(record.average_model_accuracy)},
                        {"average_model_loss", or_null(record.average_model_loss)},
                        {"peers", record.peers},
                        {"sum_of_weights", record.sum_of_weights},
                        {"mass_drift", record.mass_drift}}
             .dump()
      << '\n';
  out.flush();
  if (!out) {
    throw IoError(
        fmt::format("monitor: {}: cannot write: {}", log_.string(), run::errno_text(errno)));
  }
  spdlog::info(
      "monitor: iteration {}: consensus error {:.3e}{}{}", iteration, record.consensus_error,
      record.average_model_accuracy
          ? fmt::format(", average model accuracy {:.2f}%", 100.0 * *record.average_model_accuracy)
          : "",
      record.peers < num_peers_ ? fmt::format(" ({} of {} peers, sum of w {:.6f})", record.peers,
                                              num_peers_, record.sum_of_weights)
                                : "");
  return record;
}

std::unique_ptr<ConsensusMonitor> make_monitor(const config::TrainConfig& c, int n,
                                               std::filesystem::path log, bool consensus_only) {
  const auto mass = mass_model_of(c.algo);
  if (consensus_only) return std::make_unique<ConsensusMonitor>(n, std::move(log), mass);
  return std::make_unique<ConsensusMonitor>(c.model, c.data_dir, n, std::move(log), mass);
}

void serve_monitor(ConsensusMonitor& monitor, transport::SnapshotReceiver& receiver,
                   const std::atomic<bool>& stop, std::int64_t until_iteration,
                   std::chrono::milliseconds drain) {
  auto done = [&] {
    return until_iteration > 0 && !monitor.records().empty() &&
           monitor.records().back().iteration >= until_iteration;
  };
  try {
    while (!stop.load() && !done()) {
      if (auto message = receiver.receive(std::chrono::milliseconds(200))) {
        monitor.add(std::move(*message));
      }
    }
    while (!done()) {
      auto message = receiver.receive(drain);
      if (!message) break;
      monitor.add(std::move(*message));
    }
    monitor.flush();
  } catch (const std::exception& e) {
    spdlog::error("monitor stopped: {} (training goes on without it)", e.what());
  }
}

void ConsensusMonitor::write_average_model(const std::filesystem::path& path) const {
  if (!average_.empty()) run::write_model_file(path, {model_, average_});
}

run::MonitorSummary ConsensusMonitor::summary() const {
  run::MonitorSummary s;
  s.evaluations = static_cast<std::int64_t>(records_.size());
  s.rejected_snapshots = rejected_;
  s.off_schedule_snapshots = off_schedule_;
  s.dropped_snapshots = dropped_;
  s.mass_drift_records = drift_records_;
  s.settings_mismatch = mismatch_;
  if (!records_.empty()) {
    const auto& last = records_.back();
    s.final_iteration = last.iteration;
    s.final_consensus_error = last.consensus_error;
    s.final_average_model_accuracy = last.average_model_accuracy;
    s.final_average_model_loss = last.average_model_loss;
    s.final_peers = last.peers;
    s.final_sum_of_weights = last.sum_of_weights;
  }
  return s;
}

}  // namespace sgp::monitor
