#pragma once
// Which buffers (chunks of buffers, keyed by their first byte) the transport still reads, and for
// which destination. Shared (shared_ptr) with
// the release callbacks, which run on the transport's threads and may outlive the engine.
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "sgp/transport/message.hpp"

namespace sgp::transport {
class Transport;
}

namespace sgp::gossip {

class InFlight : public std::enable_shared_from_this<InFlight> {
 public:
  using Clock = std::chrono::steady_clock;

  // Marks `buffer` as handed to the transport for `dest`; the returned function undoes it.
  transport::ReleaseFn hold(const void* buffer, int dest);
  // Whether any chunk starting in [begin, begin + bytes) is held.
  bool busy(const void* begin, std::size_t bytes) const;
  // Waits until the chunk starting at `buffer` (or every chunk, when nullptr) is released; on
  // timeout returns the destinations still holding it (empty on success).
  std::vector<int> wait(const void* buffer, Clock::time_point deadline);
  // Waits until one of `buffers` (each `bytes` long) holds no chunk; returns its index, or -1.
  int wait_any_free(const std::vector<float*>& buffers, std::size_t bytes,
                    Clock::time_point deadline);
  // Before an engine frees its buffers: waits for every release until `deadline`, then discards
  // what is still queued for the destinations holding buffers and waits two seconds more. Returns
  // the destinations that still hold some: freeing those buffers would let the transport read
  // freed memory, so the caller leaks them instead.
  std::vector<int> release_all(transport::Transport& transport, int rank,
                               Clock::time_point deadline);

 private:
  bool busy_locked(const void* begin, std::size_t bytes) const;
  std::vector<int> holders_locked(const void* buffer) const;

  mutable std::mutex mutex_;
  std::condition_variable released_;
  std::map<const void*, std::multiset<int>> holders_;
};

}  // namespace sgp::gossip
