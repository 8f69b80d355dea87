#include "sgp/transport/inproc_network.hpp"

#include "sgp/error.hpp"

namespace sgp::transport {

InProcNetwork::InProcNetwork(int num_ranks, bool authenticated) : authenticated_(authenticated) {
  SGP_ENFORCE(num_ranks >= 1, "an in-process network needs at least one rank, got {}", num_ranks);
  for (int r = 0; r < num_ranks; ++r) boxes_.push_back(std::make_unique<Box>());
}

// Undelivered messages are dropped here, which releases their payloads.
InProcNetwork::~InProcNetwork() = default;

InProcNetwork::Box& InProcNetwork::box(int rank) const {
  SGP_ENFORCE(rank >= 0 && rank < num_ranks(), "rank {} outside the in-process network of {}", rank,
              num_ranks());
  return *boxes_[static_cast<std::size_t>(rank)];
}

void InProcNetwork::deliver(int origin, int dest, Message message) {
  Box& b = box(dest);
  {
    std::lock_guard lock(b.mutex);
    b.queue.push_back(Entry{origin, std::move(message)});
  }
  b.ready.notify_one();
}

std::optional<Message> InProcNetwork::take(int dest, std::chrono::milliseconds timeout) {
  Box& b = box(dest);
  std::unique_lock lock(b.mutex);
  b.ready.wait_for(lock, timeout, [&] { return !b.queue.empty() || b.woken; });
  b.woken = false;
  if (b.queue.empty()) return std::nullopt;
  Message m = std::move(b.queue.front().message);
  b.queue.pop_front();
  return m;
}

void InProcNetwork::wake(int dest) {
  Box& b = box(dest);
  {
    std::lock_guard lock(b.mutex);
    b.woken = true;
  }
  b.ready.notify_all();
}

std::size_t InProcNetwork::discard(int origin, int dest) {
  Box& b = box(dest);
  std::deque<Entry> dropped;  // destroyed (released) outside the lock
  std::lock_guard lock(b.mutex);
  std::deque<Entry> kept;
  for (auto& e : b.queue) (e.origin == origin ? dropped : kept).push_back(std::move(e));
  b.queue.swap(kept);
  return dropped.size();
}

std::size_t InProcNetwork::pending(int dest) const {
  Box& b = box(dest);
  std::lock_guard lock(b.mutex);
  return b.queue.size();
}

}  // namespace sgp::transport
