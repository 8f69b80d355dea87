#pragma once
// Progress of a long run: a single redrawn line on a terminal, plain periodic log lines otherwise
// (files, pipes, CI).
#include <chrono>
#include <cstdint>
#include <string>

namespace sgp::peer {

class Progress {
 public:
  Progress(std::string label, std::int64_t total);
  // `status` is shown after the counter, e.g. "loss 0.412".
  void update(std::int64_t done, const std::string& status);
  void finish(const std::string& status);

 private:
  std::string line(std::int64_t done, const std::string& status) const;

  std::string label_;
  std::int64_t total_;
  bool terminal_;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace sgp::peer
