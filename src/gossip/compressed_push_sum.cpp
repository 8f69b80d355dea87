#include "sgp/gossip/compressed_push_sum.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <mutex>

#include "sgp/data/seeded_random.hpp"
#include "sgp/error.hpp"

namespace sgp::gossip {

struct CompressedPushSum::Outstanding {
  std::mutex mutex;
  std::condition_variable released;
  int count = 0;
};

CompressedPushSum::CompressedPushSum(compute::Backend& backend, topology::Schedule schedule,
                                     transport::Transport& transport, float* x, std::size_t n,
                                     const PushSumConfig& config)
    : backend_(backend),
      schedule_(std::move(schedule)),
      transport_(transport),
      x_(x),
      n_(n),
      config_(config),
      rank_(transport.rank()),
      compressor_(config.compressor.value_or(compress::Compressor{})),
      gamma_(config.consensus_step > 0.0 ? config.consensus_step
                                         : compress::default_consensus_step(compressor_, n)),
      copy_scale_(compress::copy_scale(compressor_, n)),
      max_ahead_(rounds_ahead_bound(schedule_, config)),
      whole_(n, 0),
      own_copy_(n, 0.0f),
      difference_(n),
      out_neighbours_(schedule_.all_out_neighbors(rank_)),
      outstanding_(std::make_shared<Outstanding>()),
      logged_(kNumRejectCauses, false) {
  SGP_ENFORCE(config.compressor.has_value(), "CompressedPushSum without a compressor");
  SGP_ENFORCE(backend.kind() == compute::DeviceKind::cpu,
              "compressed gossip needs x in host memory (refused up front for other devices)");
  SGP_ENFORCE(config.mode == Mode::sync || config.mode == Mode::overlap,
              "CompressedPushSum mixes in sync or overlap mode, not {}", name_of(config.mode));
  SGP_ENFORCE(x != nullptr && n > 0 && n <= UINT32_MAX, "cannot compress a vector of {} values", n);
  SGP_ENFORCE(gamma_ > 0.0 && gamma_ <= 1.0, "consensus step {} outside (0, 1]", gamma_);
  for (int j : schedule_.all_in_neighbors(rank_)) {
    copies_[j].assign(n, 0.0f);
    next_round_[j] = 0;
  }
  if (config.copies_start_at_x) start_copies_at(x);
}

// Every copy (its own and its in-neighbours') at `start`: the same at both ends of every edge
// when every peer passes the same vector, or zero.
void CompressedPushSum::start_copies_at(const float* start) {
  const auto set = [&](std::vector<float>& copy) {
    if (start != nullptr) {
      std::copy(start, start + n_, copy.begin());
    } else {
      std::fill(copy.begin(), copy.end(), 0.0f);
    }
  };
  set(own_copy_);
  for (auto& [rank, copy] : copies_) set(copy);
}

CompressedPushSum::~CompressedPushSum() {
  // The payloads live in their release callbacks: nothing to wait for but courtesy to the links.
  std::unique_lock lock(outstanding_->mutex);
  outstanding_->released.wait_for(lock, config_.timeout, [&] { return outstanding_->count == 0; });
}

bool CompressedPushSum::step(std::int64_t iteration) {
  if ((iteration + 1) % config_.gossip_every != 0) return false;
  mix();
  return true;
}

void CompressedPushSum::mix() {
  const std::int64_t r = round_;
  send_difference(r);
  double pushed = 0.0;  // c_i
  for (const auto& edge : schedule_.out_edges(rank_, r)) pushed += edge.weight;
  const auto keep = static_cast<float>(-gamma_ * pushed);
  for (std::size_t k = 0; k < n_; ++k) x_[k] += keep * own_copy_[k];
  w_ -= gamma_ * pushed * w_;
  apply_held(r);
  receive_until(config_.mode == Mode::overlap ? r - config_.tau : r, r);
  round_ = r + 1;
  metrics_.rounds = round_;
}

// q = C(x - xhat_i) to every out-neighbour of the period; xhat_i += s decode(q).
void CompressedPushSum::send_difference(std::int64_t round) {
  const auto start = Clock::now();
  for (std::size_t k = 0; k < n_; ++k) {
    difference_[k] = x_[k] - own_copy_[k];
    if (!std::isfinite(difference_[k])) {
      throw InputError(fmt::format(
          "rank {}: round {}: the model is not finite (training diverged): lower --lr or "
          "--consensus-step",
          rank_, round));
    }
  }
  const std::uint64_t seed = data::splitmix64((static_cast<std::uint64_t>(round) << 20) ^
                                              static_cast<std::uint64_t>(rank_));
  auto payload = std::make_shared<const std::vector<std::uint8_t>>(
      compress::encode(compressor_, difference_, seed));
  compress::decode_add(compressor_, std::span<const std::uint8_t>(*payload),
                       std::span<float>(own_copy_), copy_scale_);
  const auto bytes = std::as_bytes(std::span<const std::uint8_t>(*payload));
  WireHeader h;
  h.dtype = kDtypeCompressed;
  h.sender = rank_;
  h.round = round;
  h.weight = w_;
  h.total = n_;
  h.count = bytes.size();
  h.payload_hash = payload_hash(bytes);
  for (int peer : out_neighbours_) {
    h.coefficient = std::max(0.0, schedule_.push_weight(rank_, peer, round));
    {
      std::lock_guard lock(outstanding_->mutex);
      ++outstanding_->count;
    }
    auto release = [payload, outstanding = outstanding_] {
      std::lock_guard lock(outstanding->mutex);
      --outstanding->count;
      outstanding->released.notify_all();
    };
    transport_.send(peer, encode_header(h), bytes, std::move(release));
    metrics_.messages_sent += 1;
    metrics_.bytes_sent += kHeaderBytes + bytes.size();
  }
  metrics_.send_seconds += std::chrono::duration<double>(Clock::now() - start).count();
}

// Every in-neighbour's message of every round <= wait_round is in; those of rounds <=
// apply_round are applied as they come, later ones held.
void CompressedPushSum::receive_until(std::int64_t wait_round, std::int64_t apply_round) {
  const auto deadline = Clock::now() + config_.timeout;
  // Overlap: take whatever is already there, without waiting.
  for (bool waiting = !delivered(wait_round);; waiting = !delivered(wait_round)) {
    const auto now = Clock::now();
    if (waiting && now >= deadline) fail_missing(wait_round);
    const auto timeout = waiting ? std::chrono::ceil<std::chrono::milliseconds>(deadline - now)
                                 : std::chrono::milliseconds(0);
    auto message = transport_.receive(timeout);
    metrics_.wait_seconds += std::chrono::duration<double>(Clock::now() - now).count();
    if (!message) {
      if (!waiting) return;
      continue;
    }
    const auto start = Clock::now();
    if (auto m = accept(std::move(*message))) {
      if (m->round <= apply_round) {
        apply(*m);
      } else {
        held_[m->round].push_back(std::move(*m));
      }
    }
    metrics_.apply_seconds += std::chrono::duration<double>(Clock::now() - start).count();
  }
}

// Every in-neighbour's messages up to `round` were accepted.
bool CompressedPushSum::delivered(std::int64_t round) const {
  return std::all_of(next_round_.begin(), next_round_.end(),
                     [&](const auto& next) { return next.second > round; });
}

// The message as one to apply, or nothing (rejected and counted).
std::optional<CompressedPushSum::Accepted> CompressedPushSum::accept(transport::Message message) {
  const std::size_t bytes = message.total_bytes();
  auto decoded =
      decode_message(std::move(message), whole_, schedule_.num_peers(), rank_, kDtypeCompressed);
  if (auto* cause = std::get_if<RejectCause>(&decoded)) {
    reject(*cause, fmt::format("a message of {} bytes", bytes));
    return std::nullopt;
  }
  auto& m = std::get<DecodedMessage>(decoded);
  const auto& h = m.header;
  std::string detail = fmt::format("from rank {} for round {}", h.sender, h.round);
  if (auto cause = round_problem(h, detail)) {
    reject(*cause, detail);
    return std::nullopt;
  }
  const auto* data = reinterpret_cast<const std::uint8_t*>(m.payload.data());
  try {
    compress::check_payload(compressor_, {data, m.payload.size()}, n_);
  } catch (const compress::PayloadError& e) {
    last_refusal_[h.sender] = e.what();
    reject(RejectCause::bad_payload, fmt::format("{}: {}", detail, e.what()));
    return std::nullopt;
  }
  next_round_[h.sender] = h.round + 1;
  return Accepted{h.sender, h.round, h.coefficient, h.weight,
                  std::vector<std::uint8_t>(data, data + m.payload.size())};
}

// Why a well-formed message cannot be taken now: not from an in-neighbour of the period, not its
// sender's next round, too far ahead, or a coefficient other than the schedule's.
std::optional<RejectCause> CompressedPushSum::round_problem(const WireHeader& h,
                                                            std::string& detail) const {
  const auto next = next_round_.find(h.sender);
  if (next == next_round_.end()) return RejectCause::unexpected_sender;
  if (h.round < next->second) return RejectCause::duplicate_round;
  if (h.round > next->second || h.round > round_ + max_ahead_) {
    detail += fmt::format(" (expected its round {} next)", next->second);
    return RejectCause::future_round;
  }
  const double expected = std::max(0.0, schedule_.push_weight(h.sender, rank_, h.round));
  if (std::abs(h.coefficient - expected) > 1e-12 * std::max(1.0, expected)) {
    detail += fmt::format(": coefficient {} (the schedule's: {})", h.coefficient, expected);
    return RejectCause::bad_coefficient;
  }
  return std::nullopt;
}

// The sender's copy takes the difference; an active edge mixes it in.
void CompressedPushSum::apply(const Accepted& m) {
  auto& copy = copies_.at(m.sender);
  compress::decode_add(compressor_, std::span<const std::uint8_t>(m.payload),
                       std::span<float>(copy), copy_scale_);
  if (m.coefficient > 0.0) {
    const auto a = static_cast<float>(gamma_ * m.coefficient);
    for (std::size_t k = 0; k < n_; ++k) x_[k] += a * copy[k];
    w_ += gamma_ * m.coefficient * m.weight;
  }
  metrics_.messages_received += 1;
  metrics_.bytes_received += kHeaderBytes + m.payload.size();
}

// Held messages of rounds <= up_to_round, in round order (each sender's in its order).
void CompressedPushSum::apply_held(std::int64_t up_to_round) {
  while (!held_.empty() && held_.begin()->first <= up_to_round) {
    for (const auto& m : held_.begin()->second) apply(m);
    held_.erase(held_.begin());
  }
}

void CompressedPushSum::finish() {
  if (config_.mode == Mode::overlap && round_ > 0) {
    apply_held(round_ - 1);
    receive_until(round_ - 1, round_ - 1);
  }
  wait_released();
}

void CompressedPushSum::wait_released() {
  std::unique_lock lock(outstanding_->mutex);
  if (!outstanding_->released.wait_for(lock, config_.timeout,
                                       [&] { return outstanding_->count == 0; })) {
    throw IoError(fmt::format(
        "rank {}: {} compressed message(s) not delivered within {} ms (peer dead or not reading)",
        rank_, outstanding_->count, config_.timeout.count()));
  }
}

// The copies are not in a checkpoint: every peer restarts them at zero, alike (the restored
// models differ, so copies_start_at_x cannot hold), which keeps them equal at both ends of every
// edge (and the sums conserved); the first rounds resend the models.
void CompressedPushSum::restore(std::int64_t round, double weight) {
  SGP_ENFORCE(round_ == 0, "restore() after {} rounds were mixed", round_);
  SGP_ENFORCE(round >= 0, "cannot restore round {}", round);
  SGP_ENFORCE(weight > 0.0 && std::isfinite(weight), "restored push-sum weight is {}", weight);
  round_ = round;
  w_ = weight;
  start_copies_at(nullptr);
  for (auto& [rank, next] : next_round_) next = round;
  metrics_.rounds = round_;
}

void CompressedPushSum::reject(RejectCause cause, const std::string& detail) {
  const auto i = static_cast<std::size_t>(cause);
  ++metrics_.rejected[i];
  if (logged_[i]) return;
  logged_[i] = true;
  spdlog::warn(
      "rank {}: rejected a compressed message ({}): {}; further ones for this cause are "
      "only counted",
      rank_, reject_cause_name(cause), detail);
}

void CompressedPushSum::fail_missing(std::int64_t round) {
  std::vector<std::string> missing;
  for (const auto& [rank, next] : next_round_) {
    if (next > round) continue;
    const auto refusal = last_refusal_.find(rank);
    missing.push_back(fmt::format("rank {} (its round {}{})", rank, next,
                                  refusal == last_refusal_.end() ? "" : ": " + refusal->second));
  }
  throw IoError(
      fmt::format("rank {}: no acceptable compressed message for gossip round {} within "
                  "{} ms from {}",
                  rank_, round, config_.timeout.count(), fmt::join(missing, ", ")));
}

}  // namespace sgp::gossip
