#include "sgp/launch/periodic_task.hpp"

namespace sgp::launch {

PeriodicTask::PeriodicTask(std::chrono::milliseconds period, std::function<void()> task)
    : period_(period), task_(std::move(task)), thread_([this] { loop(); }) {}

PeriodicTask::~PeriodicTask() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void PeriodicTask::loop() {
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, period_, [this] { return stop_; })) {
    lock.unlock();
    task_();
    lock.lock();
  }
}

}  // namespace sgp::launch
