#pragma once
// Push-sum with compressed gossip and error feedback (issue 37; docs/compression.md): the engine
// of sgp and osgp with --compress topk:R | randk:R | sign | qsgd:L. CHOCO-style public copies
// (Koloskova et al. 2019) on the directed, time-varying schedule (p_ij = what j pushes to i in
// the round, c_i = sum_j p_ji what i pushes). Every peer keeps a copy xhat_j of each peer j of
// its in-neighbours over the period, and its own xhat_i. Round r of peer i:
//   1. q = C(x_i - xhat_i) (dtype 7 on the wire) goes to every out-neighbour of the period, with
//      w_i and the round's coefficient p_ji (0 on an edge not active in round r); i adds
//      s * decode(q) to xhat_i, and each receiver does the same to its copy: the same bytes and
//      the same float32 additions, so the copies stay equal bit for bit (s: compress::copy_scale).
//      What was meant but not sent, x_i - xhat_i, is sent again next round: the error feedback.
//   2. x_i -= gamma c_i xhat_i and w_i -= gamma c_i w_i; for each in-neighbour j's round-r
//      message, once its copy is updated: x_i += gamma p_ij xhat_j, w_i += gamma p_ij w_j.
// Each xhat_j enters with +p_ij at its receivers and -c_j at j, which sum to 0: sum_i x_i and
// sum_i w_i are conserved (to float32 rounding for x, double for w) whatever the compressor and
// gamma, and at the fixed point xhat = x the round is push-sum with (1 - gamma) I + gamma A, so
// z_i = x_i / w_i -> sum x / sum w.
// A sender's messages are taken strictly in round order (its copy depends on every one of them);
// each is checked in full (frames, sender, round, coefficient, then compress::check_payload)
// before it is accepted, and a refused one is counted (bad_payload with the decoder's reason in
// the log) and never applied: a peer whose genuine message never comes fails at the timeout.
// Sync mode applies round r's messages in round r; overlap mode (OSGP) waits only for rounds
// <= r - tau and applies what came as it comes. Both on the caller's thread (ZeroMQ's I/O thread
// moves the bytes meanwhile); CPU backend only. The copies start at zero, or at x where the
// caller promises every peer's x is the same (config.copies_start_at_x: the trainer's seeded
// initial model, as CHOCO-SGD starts every copy at the common x0).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sgp/compress/compressor.hpp"
#include "sgp/compute/backend.hpp"
#include "sgp/gossip/mixer.hpp"
#include "sgp/gossip/push_sum_config.hpp"
#include "sgp/gossip/wire_format.hpp"
#include "sgp/topology/schedule.hpp"
#include "sgp/transport/transport.hpp"

namespace sgp::gossip {

class CompressedPushSum final : public Mixer {
 public:
  // x: n floats in host memory (the caller's, mixed in place). config.compressor must be set;
  // config.consensus_step 0 takes compress::default_consensus_step.
  CompressedPushSum(compute::Backend& backend, topology::Schedule schedule,
                    transport::Transport& transport, float* x, std::size_t n,
                    const PushSumConfig& config);
  ~CompressedPushSum() override;

  bool step(std::int64_t iteration) override;
  void mix();
  void finish() override;
  void restore(std::int64_t round, double weight) override;
  void debias(float* z) override { backend_.debias(x_, w_, z, n_); }
  std::optional<double> z_scale() const override { return 1.0 / w_; }
  double weight() const override { return w_; }
  std::int64_t round() const override { return round_; }
  PushSumMetrics metrics() const override { return metrics_; }
  double consensus_step() const { return gamma_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Accepted {
    int sender;
    std::int64_t round;
    double coefficient;
    double weight;
    std::vector<std::uint8_t> payload;
  };

  void start_copies_at(const float* start);
  void send_difference(std::int64_t round);
  void receive_until(std::int64_t wait_round, std::int64_t apply_round);
  bool delivered(std::int64_t round) const;
  std::optional<Accepted> accept(transport::Message message);
  std::optional<RejectCause> round_problem(const WireHeader& h, std::string& detail) const;
  void apply(const Accepted& m);
  void apply_held(std::int64_t up_to_round);
  void reject(RejectCause cause, const std::string& detail);
  [[noreturn]] void fail_missing(std::int64_t round);
  void wait_released();

  compute::Backend& backend_;
  topology::Schedule schedule_;
  transport::Transport& transport_;
  float* x_;
  std::size_t n_;
  PushSumConfig config_;
  int rank_;
  compress::Compressor compressor_;
  double gamma_;
  double copy_scale_;
  std::int64_t max_ahead_;
  Chunking whole_;  // the vector as one chunk: what decode_message checks `total` against
  double w_ = 1.0;
  std::int64_t round_ = 0;
  std::vector<float> own_copy_;
  std::vector<float> difference_;
  std::map<int, std::vector<float>> copies_;  // by in-neighbour of the period
  std::map<int, std::int64_t> next_round_;    // by in-neighbour: the round its next message is
  std::map<std::int64_t, std::vector<Accepted>> held_;  // accepted for rounds not mixed yet
  std::vector<int> out_neighbours_;                     // of the period
  // Sends the transport has not released yet, shared with the release callbacks.
  struct Outstanding;
  std::shared_ptr<Outstanding> outstanding_;
  PushSumMetrics metrics_;
  std::vector<bool> logged_;
  std::map<int, std::string> last_refusal_;  // by sender, for the time-out message
};

}  // namespace sgp::gossip
