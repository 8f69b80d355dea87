#pragma once
// A message as the transport hands it over: a list of frames (byte ranges) kept alive by an opaque
// owner (ZeroMQ message parts, or the in-process transport's copy). The bytes are read-only and
// untrusted: the transport only moves frames, the receiver validates what they contain. What the
// transport itself vouches for is authenticated_rank(): with CURVE, the rank whose key the
// connection was authenticated with (ZeroMQ's User-Id, set by the ZAP handler); without
// authentication, nothing.
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace sgp::transport {

// Called exactly once, possibly from another thread (ZeroMQ's I/O thread), when the transport no
// longer reads a payload it was given without copying. Must not throw.
using ReleaseFn = std::function<void()>;

class Message {
 public:
  Message() = default;
  Message(std::vector<std::span<const std::byte>> frames, std::shared_ptr<const void> owner,
          std::optional<int> authenticated_rank = std::nullopt)
      : frames_(std::move(frames)),
        owner_(std::move(owner)),
        authenticated_rank_(authenticated_rank) {}

  std::size_t num_frames() const { return frames_.size(); }
  std::span<const std::byte> frame(std::size_t i) const { return frames_.at(i); }
  std::size_t total_bytes() const {
    std::size_t total = 0;
    for (const auto& f : frames_) total += f.size();
    return total;
  }
  std::optional<int> authenticated_rank() const { return authenticated_rank_; }

 private:
  std::vector<std::span<const std::byte>> frames_;
  std::shared_ptr<const void> owner_;  // keeps the frames' memory alive
  std::optional<int> authenticated_rank_;
};

}  // namespace sgp::transport
