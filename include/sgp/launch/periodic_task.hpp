#pragma once
// Runs a task on its own thread every `period` until destroyed (progress lines while a command
// waits for its children). The destructor wakes the thread at once and joins it.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace sgp::launch {

class PeriodicTask {
 public:
  PeriodicTask(std::chrono::milliseconds period, std::function<void()> task);
  ~PeriodicTask();
  PeriodicTask(const PeriodicTask&) = delete;
  PeriodicTask& operator=(const PeriodicTask&) = delete;

 private:
  void loop();

  std::chrono::milliseconds period_;
  std::function<void()> task_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace sgp::launch
