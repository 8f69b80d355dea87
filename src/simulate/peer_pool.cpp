#include "sgp/simulate/peer_pool.hpp"

#include "sgp/error.hpp"

namespace sgp::simulate {

PeerPool::PeerPool(int threads) : threads_(threads) {
  SGP_ENFORCE(threads >= 1, "a peer pool needs at least one thread, got {}", threads);
  for (int t = 1; t < threads; ++t) workers_.emplace_back([this, t] { worker_loop(t); });
}

PeerPool::~PeerPool() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  start_.notify_all();
  for (auto& w : workers_) w.join();
}

void PeerPool::run_range(int worker) {
  const std::size_t t = static_cast<std::size_t>(threads_);
  const std::size_t begin = count_ * static_cast<std::size_t>(worker) / t;
  const std::size_t end = count_ * static_cast<std::size_t>(worker + 1) / t;
  try {
    if (begin < end) (*fn_)(worker, begin, end);
  } catch (...) {
    std::lock_guard lock(mutex_);
    if (!error_) error_ = std::current_exception();
  }
}

void PeerPool::worker_loop(int worker) {
  std::size_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    run_range(worker);
    std::lock_guard lock(mutex_);
    if (--pending_ == 0) done_.notify_one();
  }
}

void PeerPool::for_ranges(std::size_t count, const RangeFn& fn) {
  {
    std::lock_guard lock(mutex_);
    fn_ = &fn;
    count_ = count;
    error_ = nullptr;
    pending_ = threads_ - 1;
    ++generation_;
  }
  start_.notify_all();
  run_range(0);
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return pending_ == 0; });
  fn_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

}  // namespace sgp::simulate
