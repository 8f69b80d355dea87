#pragma once
// Which buffers the transport still reads, and for which destination. Shared (shared_ptr) with
// the release callbacks, which run on the transport's threads and may outlive the engine.
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "sgp/transport/message.hpp"

namespace sgp::gossip {

class InFlight : public std::enable_shared_from_this<InFlight> {
 public:
  using Clock = std::chrono::steady_clock;

  // Marks `buffer` as handed to the transport for `dest`; the returned function undoes it.
  transport::ReleaseFn hold(const void* buffer, int dest);
  bool busy(const void* buffer) const;
  // Waits until `buffer` (or every buffer, when nullptr) is released; on timeout returns the
  // destinations still holding it (empty on success).
  std::vector<int> wait(const void* buffer, Clock::time_point deadline);
  // Waits until one of `buffers` is not held; returns its index, or -1 on timeout.
  int wait_any_free(const std::vector<float*>& buffers, Clock::time_point deadline);

 private:
  std::vector<int> holders_locked(const void* buffer) const;

  mutable std::mutex mutex_;
  std::condition_variable released_;
  std::map<const void*, std::multiset<int>> holders_;
};

}  // namespace sgp::gossip
