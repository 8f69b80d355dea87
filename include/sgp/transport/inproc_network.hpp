#pragma once
// The shared medium of InProcTransport: one mailbox per rank, for N peers running as threads of
// one process (unit tests).
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "sgp/transport/message.hpp"

namespace sgp::transport {

class InProcNetwork {
 public:
  // `num_ranks` mailboxes, ranks 0..num_ranks-1 (a test may give a rogue sender its own rank).
  // With `authenticated`, every message carries its sender's rank as authenticated_rank(), as
  // CURVE gives it the rank of the sender's key.
  explicit InProcNetwork(int num_ranks, bool authenticated = false);
  ~InProcNetwork();
  InProcNetwork(const InProcNetwork&) = delete;
  InProcNetwork& operator=(const InProcNetwork&) = delete;

  int num_ranks() const { return static_cast<int>(boxes_.size()); }
  bool authenticated() const { return authenticated_; }

  void deliver(int origin, int dest, Message message);
  std::optional<Message> take(int dest, std::chrono::milliseconds timeout);
  void wake(int dest);
  // Drops the messages from `origin` still waiting in `dest`'s mailbox; returns how many.
  std::size_t discard(int origin, int dest);
  // Messages waiting in `dest`'s mailbox.
  std::size_t pending(int dest) const;

 private:
  struct Entry {
    int origin;
    Message message;
  };
  struct Box {
    mutable std::mutex mutex;
    std::condition_variable ready;
    std::deque<Entry> queue;
    bool woken = false;
  };
  Box& box(int rank) const;

  std::vector<std::unique_ptr<Box>> boxes_;
  bool authenticated_;
};

}  // namespace sgp::transport
