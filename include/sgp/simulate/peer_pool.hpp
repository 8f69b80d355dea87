#pragma once
// A few threads that run one function over contiguous ranges of peers (or dimensions), for the
// simulator's round loop: thousands of peers, no thread per peer. Workers sleep on a condition
// variable between jobs (nothing spins).
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sgp::simulate {

class PeerPool {
 public:
  // fn(worker, begin, end): worker in 0..threads-1 (for per-thread scratch), [begin, end) its
  // share of [0, count).
  using RangeFn = std::function<void(int, std::size_t, std::size_t)>;

  explicit PeerPool(int threads);
  ~PeerPool();
  PeerPool(const PeerPool&) = delete;
  PeerPool& operator=(const PeerPool&) = delete;

  int threads() const { return threads_; }
  // Splits [0, count) into threads() contiguous ranges, runs fn on each (the caller runs the
  // first), returns when all are done; rethrows the first exception a range threw.
  void for_ranges(std::size_t count, const RangeFn& fn);

 private:
  void worker_loop(int worker);
  void run_range(int worker);

  int threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_;
  std::condition_variable done_;
  std::size_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  const RangeFn* fn_ = nullptr;
  std::size_t count_ = 0;
  std::exception_ptr error_;
};

}  // namespace sgp::simulate
