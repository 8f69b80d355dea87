#pragma once
// Asynchronous push-sum (the asgp algorithm): a peer never waits for a slow one. Every round it
// pushes p_ji of its mass to each out-neighbour, as a push kept until acknowledged
// (acked_pushes.hpp, async_acked.cpp; the default) or onto the edge's running total
// (running_sums.hpp, config.acked_pushes false), sends it without waiting for anything, then
// applies whatever has arrived (last, so that as much of the mass in flight as possible counts in
// its next SGD step); a slow peer slows only itself, and a lost, duplicated or reordered message
// costs no mass. Two waits are bounded:
// the first round's, for its in-neighbours to be heard from, and --partner-wait's, at most a
// multiple of the peer's own round time, for the round's in-neighbours that keep pace (so that
// calm peers mix nearly in step; keep_step_with_in_neighbours).
//
// Peers that fail, join and leave (membership.hpp, control_message.hpp):
//   - Failure: every peer watches the peers that push to it (failure_detector.hpp: an adaptive
//     deadline learnt from the gaps between their messages, capped by the timeout). One silent
//     past its deadline is excluded: the detecting peer tells every live peer, and each repairs
//     the schedule over the survivors (topology/repair.hpp). The mass the dead peer held is
//     gone; the survivors converge to the average of what they hold. A peer told that it was
//     itself excluded stops with IoError (restart it with --join).
//   - Join: a peer started with join() asks every rank for admission; the first live rank after
//     it sponsors it: halves its own (x, w), sends one half with the membership table and its
//     round, and tells everyone the newcomer's new incarnation. z is unchanged for both.
//   - Leave: leave() hands all of this peer's mass to a live out-neighbour and tells everyone.
//   - Who may say what (on top of decode_control's binding of each notice to the key it came
//     with): an exclusion of s only from a live peer that observes s (s pushes to it, in the
//     schedule as given or as repaired); an admission of s only from its sponsor in this view,
//     after s asked to join; a joiner's own admission only from the sponsor its table names; a
//     leave's mass only to the leaver's heir, once, 0 < w <= N and finite. A notice refused
//     because views differ is kept and taken once a change of membership entitles its sender.
//   - A budget of samples (config.sample_budget > 0, SampleBudget in mixer.hpp; async_budget.cpp):
//     each peer tells everyone its running count of samples (progress notices, each time it grew
//     by a hundredth of its fair share), keeps the newest count of every rank and incarnation
//     (a stale or replayed notice never lowers it; a dead peer's count stays), and the first to
//     know of a sum at least the budget tells everyone it is spent (budget_spent).
//   - Finish: finish() tells everyone this peer is done and keeps mixing (no training) until
//     every live peer is done, then until its z has settled (it no longer moves when its
//     in-neighbours' totals arrive), so that the peers end in agreement.
//
// The engine holds a peer's mass as w (z + r) (running_sums.hpp: HeldMass): the caller's buffer
// holds z (mixer.hpp: what it holds for each engine) and is what the engine mixes, in place on
// the CPU backend, with r, the part of the ratio below float32's precision, beside it. A total
// that arrives sets the ratio to (w (z + r) + dx) / (w + dw) in one pass, a push adds p w (z + r)
// to the edge's running total in the pass that makes its float32 delta, and what the peer keeps
// needs no pass at all (w = keep w; z and r stay). What the caller changed in z (the SGD step) is
// thereby a change of w times as much mass, so that a step's size in z does not depend on w
// (asgp's w can fall far below 1 while a peer's mass is in flight). docs/asynchronous.md, "Mixing
// z in float32", has the numerical argument.
// One thread (the caller's); the transport's release callbacks may run on any thread.
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sgp/compute/backend.hpp"
#include "sgp/gossip/control_message.hpp"
#include "sgp/gossip/membership.hpp"
#include "sgp/gossip/mixer.hpp"
#include "sgp/gossip/wire_format.hpp"
#include "sgp/topology/schedule.hpp"
#include "sgp/transport/transport.hpp"

namespace sgp::gossip {

class AckedInEdge;
class AckedOutEdge;
struct AckedPush;
class FailureDetector;
struct HeldMass;
class InEdge;
class OutEdge;
struct SendBuffer;

class AsyncPushSum final : public Mixer, public MembershipControl, public SampleBudget {
 public:
  // As PushSumEngine: x is n floats in the backend's memory, mixed in place; the transport can
  // reach every rank of the schedule (control notices go to all of them). w starts at 1.
  AsyncPushSum(compute::Backend& backend, topology::Schedule schedule,
               transport::Transport& transport, float* x, std::size_t n, PushSumConfig config);
  ~AsyncPushSum() override;

  bool step(std::int64_t iteration) override;
  // One round: push, apply what arrived, look for failed peers.
  void mix();
  // Handles what arrives during `duration` (waiting without spinning): pacing between rounds.
  void idle(std::chrono::milliseconds duration) override;
  // The unchanged totals to every live out-neighbour, at most once per keep-alive period (and
  // the pause notice renewed, in a pause).
  void stay_heard() override;
  // Tells the peers that push to this one that it pauses (they keep their pushes), then that it
  // mixes again at its pace (async_pause.cpp).
  void begin_pause() override;
  void end_pause() override;
  void finish() override;
  void restore(std::int64_t round, double weight) override;
  void debias(float* z) override;
  std::optional<double> z_scale() const override { return std::nullopt; }
  const float* trainable_z() const override { return host_z_.empty() ? x_ : nullptr; }
  double weight() const override { return w_; }
  std::int64_t round() const override { return round_; }
  PushSumMetrics metrics() const override;
  MembershipControl* membership_control() override { return this; }
  SampleBudget* sample_budget() override;

  void count_samples(std::int64_t taken) override;
  std::int64_t samples_known() const override;
  bool budget_spent() const override;
  void await_all_started() override;

  std::int64_t join() override;
  void leave() override;
  const std::vector<MembershipEvent>& events() const override { return events_; }
  const Membership& membership() const { return membership_; }
  int rank() const { return rank_; }

  // Where mix() spent its thread's CPU time, summed over rounds (tests/bench/bench_asgp.cpp).
  struct RoundProfile {
    double receive_s = 0.0;  // decoding, checking and applying what arrived (drain)
    double passes_s = 0.0;   // the passes over x: the caller's change, pushes, keep, z
    double send_s = 0.0;     // payload checksums and handing the payloads to the transport
  };
  const RoundProfile& profile() const { return profile_; }
  // Bytes the engine holds for n elements now: x, the caller's last z, every edge's totals,
  // bases and send buffers.
  std::size_t state_bytes() const;

 private:
  using Clock = std::chrono::steady_clock;

  void await_in_neighbours();
  void keep_step_with_in_neighbours();
  bool keeps_pace_but_not_here(int j, std::int64_t round) const;
  void note_round_from(int j, std::int64_t round);
  bool behind_but_not_slow(int j) const;
  bool slower_by_itself(int j) const;
  Clock::duration lag_wait_limit() const;
  void take_caller_changes();
  void give_to_caller();
  HeldMass held();
  void push_round();
  double pace_share(int dest) const;
  double paced_share(int dest, double factor);
  void announce_pace();
  void tell_pace();
  void tell_pause();
  bool paused(int dest) const;
  void keep_paused_watching(int dest);
  void tell_pushers(const ControlMessage& message);
  void tell_neighbours(const ControlMessage& message);
  void say_alive(int dest);
  void hold_round();
  // What an out-neighbour is sent when no mass moves to it: the unchanged total (running sums),
  // or the pushes it has not acknowledged, else an alive notice (acknowledged pushes).
  void remind(int dest);
  void send_total(int dest, OutEdge& edge);
  // --acked-pushes (async_acked.cpp).
  void push_acked(int dest, double share, const HeldMass& mass);
  bool send_again(int dest, AckedOutEdge& edge);
  std::chrono::milliseconds resend_after(int dest) const;
  void send_push(int dest, std::uint64_t epoch, const std::shared_ptr<AckedPush>& push);
  void handle_acked_push(const WireHeader& h, std::span<const std::byte> payload);
  void on_push_ack(const ControlMessage& c);
  AckedOutEdge& acked_out_edge(int dest);
  void send(int dest, std::uint64_t epoch, const std::shared_ptr<SendBuffer>& buffer,
            double weight);
  void send_chunk(int dest, WireHeader& h, std::span<const std::byte> payload,
                  transport::ReleaseFn release);
  void drain(std::optional<transport::Message> first = std::nullopt);
  std::vector<bool> superseded_in_batch(const std::vector<transport::Message>& batch) const;
  void handle(transport::Message message);
  void handle_data(DecodedMessage message);
  void handle_control(const DecodedControl& control);
  void on_join_request(const ControlMessage& c);
  void on_admission(const DecodedControl& control);
  void on_leave(const DecodedControl& control);
  void on_group_notice(const ControlMessage& c);
  void on_progress(const ControlMessage& c);
  void on_budget_spent(const ControlMessage& c);
  void check_budget();
  bool all_started() const;
  void keep_out_neighbours_watching();
  std::chrono::milliseconds keep_alive_every() const;
  bool entitled(const ControlMessage& c) const;
  bool observes(int observer, int subject) const;
  bool plausible_heir(int leaver) const;
  void apply_group_notice(const ControlMessage& c);
  void defer(const ControlMessage& c);
  void retry_deferred();
  struct Mass {
    double w = 0.0;
    std::vector<double> x;
  };
  std::optional<Mass> parse_mass(std::span<const std::byte> bytes, const std::string& what);
  void add_mass(const Mass& mass);
  void check_failures();
  void exclude(int rank, std::uint32_t incarnation, const std::string& why);
  void admit_incarnation(int rank, std::uint32_t incarnation);
  void membership_changed(const std::string& what, int rank);
  void tell(int dest, const ControlMessage& message, std::vector<std::byte> payload = {});
  void tell_everyone(ControlMessage message);
  std::vector<std::byte> mass_payload(double share);
  bool all_live_done() const;
  int live_others() const;
  std::uint64_t out_epoch(int dest) const;
  void renormalise();
  OutEdge& out_edge(int dest);
  void reject(RejectCause cause, const std::string& detail);
  void settle(std::chrono::milliseconds pace);
  void wait_for_sends(Clock::time_point deadline);
  // Drops what is still queued for ranks that left or were excluded: nobody will read it, and
  // the transport would hold the exit for its linger waiting to deliver it.
  void let_go_of_departed();

  compute::Backend& backend_;
  topology::Schedule schedule_;  // as given
  topology::Schedule mixing_;    // repaired over the live peers
  transport::Transport& transport_;
  float* x_;
  std::size_t n_;
  PushSumConfig config_;
  int rank_;
  Chunking chunking_;

  std::vector<float> host_z_;    // a device backend's z, mirrored on the host (empty on the CPU)
  std::vector<float> given_;     // ... and as it was last uploaded to the caller's buffer
  float* z_;                     // the z mixed: the caller's buffer on the CPU, else host_z_
  std::vector<float> residual_;  // z's part below float32 precision (running_sums.hpp: HeldMass)
  double w_ = 1.0;
  std::uint32_t generation_ = 0;                    // exclusions this peer renormalised after
  std::map<int, std::uint32_t> sender_generation_;  // the newest generation seen per sender
  std::int64_t round_ = 0;
  std::optional<Clock::time_point> last_mix_;
  std::optional<Clock::time_point> kept_alive_;     // stay_heard()'s last sends
  std::optional<Clock::time_point> holding_since_;  // first of the rounds held in a row
  double mix_interval_s_ = 0.0;                     // smoothed time between this peer's rounds
  double busy_interval_s_ = 0.0;  // ... less the waits for in-neighbours that keep pace
  double round_wait_s_ = 0.0;     // the last round's waits for in-neighbours
  std::map<int, std::int64_t> last_round_from_;      // the newest round each in-neighbour sent
  std::map<int, Clock::time_point> heard_round_at_;  // ... when it came
  std::map<int, double> pace_from_;    // seconds per round of each in-neighbour, as seen here
  double announced_interval_s_ = 0.0;  // the pace we last told our neighbours
  double announced_busy_s_ = 0.0;      // ... and the busy time per round
  std::int64_t announced_at_round_ = 0;
  std::map<int, double> pace_of_;      // seconds per round each out-neighbour said it mixes at
  std::map<int, double> busy_of_;      // ... and busy seconds per round each neighbour said
  std::map<int, double> push_credit_;  // acked pushes: pace shares owed to each slower peer
  // Pauses (async_pause.cpp): this peer's, and the out-neighbours that said they pause, until when.
  bool pausing_ = false;
  Clock::time_point pause_began_, pause_told_;
  double paused_s_ = 0.0;  // pausing since the last round: not part of its pace
  std::map<int, Clock::time_point> paused_until_;
  std::map<int, Clock::time_point> last_send_to_;
  Clock::time_point last_news_;  // finish(): when a peer last said it was done, or was excluded

  Membership membership_;
  std::unique_ptr<FailureDetector> detector_;
  std::map<int, std::unique_ptr<OutEdge>> out_;
  std::map<int, std::unique_ptr<InEdge>> in_;
  std::map<int, std::unique_ptr<AckedOutEdge>> acked_out_;  // --acked-pushes
  std::map<int, std::unique_ptr<AckedInEdge>> acked_in_;
  std::vector<bool> done_;                  // ranks that said they finished their iterations
  std::map<int, std::uint32_t> sponsored_;  // join request ids already answered, per rank
  std::vector<bool> join_requested_;        // ranks that asked to join since their last admission
  std::vector<int> sponsors_;               // the ranks whose admission (and mass) we took
  std::vector<ControlMessage> deferred_;    // exclusions and admissions not entitled (yet)
  bool retrying_ = false;                   // in retry_deferred()
  bool joining_ = false;                    // join() called: data waits for the admission
  std::optional<std::int64_t> admitted_round_;
  bool left_ = false;
  std::vector<MembershipEvent> events_;

  // --work budget (async_budget.cpp): the newest count of samples of each (rank, incarnation).
  std::map<std::pair<int, std::uint32_t>, std::int64_t> samples_of_;
  std::int64_t announced_samples_ = 0;  // this peer's count in its last progress notice
  bool budget_spent_ = false;           // known to be spent: by this peer's sum or another's word

  PushSumMetrics metrics_;
  RoundProfile profile_;
  std::array<bool, kNumRejectCauses> logged_{};
};

}  // namespace sgp::gossip
