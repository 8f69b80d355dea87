#include "in_flight.hpp"

#include <spdlog/spdlog.h>

#include "sgp/transport/transport.hpp"

namespace sgp::gossip {

transport::ReleaseFn InFlight::hold(const void* buffer, int dest) {
  {
    std::lock_guard lock(mutex_);
    holders_[buffer].insert(dest);
  }
  return [self = shared_from_this(), buffer, dest] {
    {
      std::lock_guard lock(self->mutex_);
      auto it = self->holders_.find(buffer);
      if (it != self->holders_.end()) {
        auto one = it->second.find(dest);
        if (one != it->second.end()) it->second.erase(one);
        if (it->second.empty()) self->holders_.erase(it);
      }
    }
    self->released_.notify_all();
  };
}

bool InFlight::busy_locked(const void* begin, std::size_t bytes) const {
  const auto* first = static_cast<const std::byte*>(begin);
  auto it = holders_.lower_bound(begin);
  return it != holders_.end() && static_cast<const std::byte*>(it->first) < first + bytes;
}

bool InFlight::busy(const void* begin, std::size_t bytes) const {
  std::lock_guard lock(mutex_);
  return busy_locked(begin, bytes);
}

std::vector<int> InFlight::holders_locked(const void* buffer) const {
  std::vector<int> out;
  for (const auto& [b, dests] : holders_) {
    if (buffer == nullptr || b == buffer) out.insert(out.end(), dests.begin(), dests.end());
  }
  return out;
}

std::vector<int> InFlight::wait(const void* buffer, Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  released_.wait_until(lock, deadline, [&] {
    return buffer == nullptr ? holders_.empty() : !holders_.contains(buffer);
  });
  return holders_locked(buffer);
}

int InFlight::wait_any_free(const std::vector<float*>& buffers, std::size_t bytes,
                            Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  int found = -1;
  released_.wait_until(lock, deadline, [&] {
    for (std::size_t i = 0; i < buffers.size(); ++i) {
      if (!busy_locked(buffers[i], bytes)) {
        found = static_cast<int>(i);
        return true;
      }
    }
    return false;
  });
  return found;
}

std::vector<int> InFlight::release_all(transport::Transport& transport, int rank,
                                       Clock::time_point deadline) {
  auto holders = wait(nullptr, deadline);
  if (holders.empty()) return holders;
  for (int dest : holders) {
    try {
      transport.discard_pending(dest);
    } catch (const std::exception& e) {
      spdlog::warn("rank {}: discarding messages to rank {}: {}", rank, dest, e.what());
    }
  }
  return wait(nullptr, Clock::now() + std::chrono::seconds(2));
}

}  // namespace sgp::gossip
