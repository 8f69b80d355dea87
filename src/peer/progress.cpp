#include "sgp/peer/progress.hpp"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace sgp::peer {

namespace {
// A terminal is redrawn at most this often; logs get a line at most this often.
constexpr auto kRedraw = std::chrono::milliseconds(200);
constexpr auto kLogLine = std::chrono::seconds(10);
}  // namespace

Progress::Progress(std::string label, std::int64_t total)
    : label_(std::move(label)),
      total_(total),
      terminal_(::isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

std::string Progress::line(std::int64_t done, const std::string& status) const {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0.0;
  const double eta = rate > 0 ? static_cast<double>(total_ - done) / rate : 0.0;
  return fmt::format("{} {:>6}/{} ({:5.1f}%)  {:.1f} it/s  eta {:.0f}s  {}", label_, done, total_,
                     100.0 * static_cast<double>(done) / static_cast<double>(total_), rate, eta,
                     status);
}

void Progress::update(std::int64_t done, const std::string& status) {
  const auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < (terminal_
                              ? std::chrono::duration_cast<std::chrono::milliseconds>(kRedraw)
                              : std::chrono::duration_cast<std::chrono::milliseconds>(kLogLine)))
    return;
  last_draw_ = now;
  if (terminal_) {
    std::fprintf(stderr, "\r\033[K%s", line(done, status).c_str());
    std::fflush(stderr);
  } else {
    spdlog::info("{}", line(done, status));
  }
}

void Progress::finish(const std::string& status) {
  if (terminal_) std::fprintf(stderr, "\r\033[K");
  spdlog::info("{}", line(total_, status));
}

}  // namespace sgp::peer
