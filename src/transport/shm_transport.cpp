#include "sgp/transport/shm_transport.hpp"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "sgp/error.hpp"

namespace sgp::transport {

std::uint64_t ShmStats::refused_total() const {
  return std::accumulate(refused.begin(), refused.end(), std::uint64_t{0});
}

ShmTransport::ShmTransport(ZmqTransport& inner, ShmOptions options)
    : inner_(inner), options_(options), local_(inner.same_host_destinations()) {
  if (const int stale = remove_stale_rings(); stale > 0) {
    spdlog::info("removed {} shared-memory rings left by processes that no longer run", stale);
  }
  if (local_.empty()) {
    spdlog::info("local fast path: no peer of this host to push to");
  } else {
    spdlog::info("local fast path to ranks {} (shared-memory rings of {} bytes)",
                 fmt::join(local_, ","), options_.ring_bytes);
  }
}

// A ring's name stays in /dev/shm until its receiver attaches: keep it while a descriptor
// may still be on its way (bounded by the linger), then unlink it (the writers' destructors).
ShmTransport::~ShmTransport() {
  const auto deadline = std::chrono::steady_clock::now() + inner_.linger();
  for (const auto& [dest, writer] : writers_) {
    while (!writer->attached() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
}

ShmRingWriter* ShmTransport::writer_for(int dest) {
  if (!local_.contains(dest)) return nullptr;
  auto& writer = writers_[dest];
  if (!writer) {
    try {
      writer = std::make_unique<ShmRingWriter>(rank(), dest, options_.ring_bytes);
    } catch (const IoError& e) {
      // No ring (e.g. /dev/shm is full): this edge goes over ZeroMQ, which still works.
      spdlog::warn("{}; sending to rank {} over ZeroMQ instead", e.what(), dest);
      local_.erase(dest);
      writers_.erase(dest);
      return nullptr;
    }
  }
  return writer.get();
}

void ShmTransport::send(int dest, std::span<const std::byte> header,
                        std::span<const std::byte> payload, ReleaseFn on_release) {
  ShmRingWriter* writer = payload.size() < std::max<std::size_t>(options_.min_payload_bytes, 1)
                              ? nullptr
                              : writer_for(dest);
  const auto descriptor = writer ? writer->write(payload) : std::nullopt;
  if (!descriptor) {
    if (writer) {
      const std::lock_guard lock(stats_mutex_);
      ++stats_.inline_messages;
    }
    inner_.send(dest, header, payload, std::move(on_release));
    return;
  }
  if (on_release) on_release();  // copied: the caller may reuse its buffer
  const auto encoded = encode_shm_descriptor(*descriptor);
  frame_.assign(encoded.begin(), encoded.end());
  frame_.insert(frame_.end(), header.begin(), header.end());
  inner_.send(dest, frame_, {}, nullptr);
  const std::lock_guard lock(stats_mutex_);
  stats_.shm_bytes += payload.size();
  ++stats_.shm_messages;
}

std::optional<Message> ShmTransport::receive(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (auto left = timeout;;) {
    auto message = inner_.receive(left);
    if (!message || !starts_with_shm_magic(message->frame(0))) return message;
    if (auto resolved = resolve(std::move(*message))) return resolved;
    // Refused (counted): wait on for the rest of the time.
    left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
  }
}

namespace {

// A received descriptor message and the ring payload it stands for: destroying it (when the
// engine drops the message) hands the payload's bytes back to the ring.
struct HeldPayload {
  HeldPayload(Message d, std::shared_ptr<ShmRingReader> r, std::uint64_t p)
      : descriptor(std::move(d)), ring(std::move(r)), position(p) {}
  HeldPayload(const HeldPayload&) = delete;
  HeldPayload& operator=(const HeldPayload&) = delete;
  ~HeldPayload() { ring->release(position); }

  Message descriptor;
  std::shared_ptr<ShmRingReader> ring;
  std::uint64_t position;
};

}  // namespace

std::optional<Message> ShmTransport::resolve(Message m) {
  const auto d = decode_shm_descriptor(m.frame(0));
  if (!d || m.num_frames() != 2 || !m.frame(1).empty()) {
    count_refusal(ShmRefusal::bad_descriptor, m);
    return std::nullopt;
  }
  if (m.authenticated_rank() && *m.authenticated_rank() != d->sender) {
    count_refusal(ShmRefusal::wrong_sender, m);
    return std::nullopt;
  }
  auto& reader = readers_[d->sender];
  // A sender's first ring, or a new one (the rank restarted, e.g. an asgp peer that rejoins):
  // held payloads keep the old one mapped until they are released.
  if (!reader || reader->name() != d->name) {
    auto attached = ShmRingReader::attach(*d, rank());
    if (!attached.reader) {
      count_refusal(attached.refusal, m);
      return std::nullopt;
    }
    reader = std::move(attached.reader);
    spdlog::debug("rank {}: attached rank {}'s ring {}", rank(), d->sender, reader->name());
  }
  ShmRefusal refusal = ShmRefusal::out_of_bounds;
  const auto payload = reader->accept(*d, refusal);
  if (!payload) {
    count_refusal(refusal, m);
    return std::nullopt;
  }
  const auto header = m.frame(0).subspan(kShmDescriptorBytes);
  const auto authenticated = m.authenticated_rank();
  auto held = std::make_shared<HeldPayload>(std::move(m), reader, d->position);
  return Message({header, *payload}, std::move(held), authenticated);
}

void ShmTransport::count_refusal(ShmRefusal why, const Message& m) {
  std::uint64_t count = 0;
  {
    const std::lock_guard lock(stats_mutex_);
    count = ++stats_.refused[static_cast<std::size_t>(why)];
  }
  const std::string from =
      m.authenticated_rank() ? fmt::format("rank {}", *m.authenticated_rank()) : "a sender";
  // The first of each cause is a warning; the rest are counted (stats) and logged at debug.
  spdlog::log(count == 1 ? spdlog::level::warn : spdlog::level::debug,
              "rank {}: refused a shared-memory descriptor from {}: {} (not read)", rank(), from,
              name_of(why));
}

void ShmTransport::discard_pending(int dest) {
  inner_.discard_pending(dest);
  local_.erase(dest);
  writers_.erase(dest);  // unlinks the ring's name if its receiver never attached
}

// A peer that left sends and reads nothing more: its rings are unmapped (a payload still held
// keeps its ring until released). A later send to the rank makes a new ring.
void ShmTransport::release_peer(int peer) {
  inner_.release_peer(peer);
  writers_.erase(peer);  // unlinks the ring's name if its receiver never attached
  readers_.erase(peer);
}

ShmStats ShmTransport::stats() const {
  const std::lock_guard lock(stats_mutex_);
  return stats_;
}

int remove_stale_rings() {
  constexpr std::string_view kPrefix = "sgp-shm-";
  std::error_code ec;
  int removed = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(kPrefix)) continue;
    const auto pid = std::atoi(name.c_str() + kPrefix.size());
    struct stat st {};
    if (pid <= 0 || ::stat(entry.path().c_str(), &st) != 0 || st.st_uid != ::geteuid()) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // its creator still runs
    if (::shm_unlink(("/" + name).c_str()) == 0) ++removed;
  }
  return removed;
}

}  // namespace sgp::transport
