#pragma once
// Fault injection for experiments and tests: a Transport that wraps another and, seeded, drops,
// duplicates, reorders and delays what is sent through it (`--inject
// drop=0.05,dup=0.01,reorder=0.05,delay=20ms,seed=1`). Receiving is untouched; faults happen on
// the sending side, per message (one chunk), independently.
//
// Delayed and reordered messages are held here and handed to the inner transport from send()
// and receive() once due, so no extra thread touches the inner transport (its one-thread-at-a-
// time contract holds). receive() waits in slices short enough to send what falls due.
#include <chrono>
#include <cstdint>
#include <deque>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "sgp/transport/transport.hpp"

namespace sgp::transport {

struct FaultSpec {
  double drop = 0.0;       // probability a message is lost
  double duplicate = 0.0;  // probability it is delivered twice
  double reorder = 0.0;    // probability it is held back so that later messages overtake it
  std::chrono::milliseconds delay{0};  // every message arrives this much later (link latency)
  std::uint64_t seed = 0;
  int delay_rounds = 0;  // sgp simulate (parse_round_fault_spec): each message 0..this late

  bool any() const {
    return drop > 0 || duplicate > 0 || reorder > 0 || delay.count() > 0 || delay_rounds > 0;
  }
  friend bool operator==(const FaultSpec&, const FaultSpec&) = default;
};

// "drop=0.05,dup=0.01,reorder=0.05,delay=20ms,seed=1" (any subset; "" or "none": no faults).
// InputError "'PART': what" for anything else (the caller says where).
FaultSpec parse_fault_spec(std::string_view text);
std::string format_fault_spec(const FaultSpec& spec);  // the inverse

// The same syntax, read by the same parser, for sgp simulate, whose time is counted in rounds:
// "drop=0.05,dup=0.01,delay=2,seed=1", delay=N meaning each message 0..N rounds late (uniform,
// so it reorders too; there is no reorder=). Sets delay_rounds, never delay.
FaultSpec parse_round_fault_spec(std::string_view text);
std::string format_round_fault_spec(const FaultSpec& spec);  // the inverse: the parts set

struct FaultCounts {
  std::uint64_t dropped = 0, duplicated = 0, reordered = 0, delayed = 0;
};

class FaultyTransport final : public Transport {
 public:
  // Messages whose header `spare` accepts pass untouched (e.g. membership notices: the faults
  // are for the gossip data).
  using Spare = bool (*)(std::span<const std::byte> header);
  // The seed is mixed with the inner transport's rank, so peers draw different faults.
  FaultyTransport(Transport& inner, FaultSpec spec, Spare spare = nullptr);
  // Messages still held are dropped (and released).
  ~FaultyTransport() override;

  int rank() const override { return inner_.rank(); }
  void send(int dest, std::span<const std::byte> header, std::span<const std::byte> payload,
            ReleaseFn on_release) override;
  std::optional<Message> receive(std::chrono::milliseconds timeout) override;
  void wake() override { inner_.wake(); }
  void discard_pending(int dest) override;
  void release_peer(int peer) override { inner_.release_peer(peer); }

  const FaultCounts& counts() const { return counts_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Held {
    Clock::time_point due;
    int dest;
    std::vector<std::byte> header;
    std::span<const std::byte> payload;
    ReleaseFn release;
  };
  bool draw(double probability);
  void hold(Clock::time_point due, int dest, std::span<const std::byte> header,
            std::span<const std::byte> payload, ReleaseFn release);
  void send_due(Clock::time_point now);

  Transport& inner_;
  FaultSpec spec_;
  Spare spare_;
  std::mt19937_64 rng_;
  std::deque<Held> held_;  // ordered by due time
  FaultCounts counts_;
};

}  // namespace sgp::transport
