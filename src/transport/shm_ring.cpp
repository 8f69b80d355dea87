#include "sgp/transport/shm_ring.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>

#include <fmt/format.h>

#include "sgp/byte_fields.hpp"
#include "sgp/error.hpp"

namespace sgp::transport {

namespace {

constexpr std::uint64_t kRingMagic = 0x31474E4952504753ULL;  // "SGPRING1"
constexpr std::size_t kHeaderBytes = 4096;                   // data starts on its own page
constexpr std::size_t kAlign = 64;                           // payloads start on cache lines
constexpr std::uint64_t kMaxCapacity = std::uint64_t{1} << 30;
constexpr std::string_view kNamePrefix = "/sgp-shm-";
constexpr std::size_t kNameField = kShmDescriptorBytes - 48;

// The ring's header, at offset 0 of the object. The positions and the flag are accessed through
// std::atomic_ref: the two processes share them.
struct RingHeader {
  std::uint64_t magic;
  std::uint64_t capacity;
  std::int32_t sender;
  std::int32_t receiver;
  std::array<std::byte, 16> token;
  alignas(64) std::uint32_t attached;
  alignas(64) std::uint64_t write_position;
  alignas(64) std::uint64_t read_position;
};
static_assert(sizeof(RingHeader) <= kHeaderBytes);

std::uint64_t align_up(std::uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

template <typename T>
std::atomic_ref<T> shared(T& field) {
  return std::atomic_ref<T>(field);
}

void fill_random(std::span<std::byte> out) {
  for (std::size_t filled = 0; filled < out.size();) {
    const ssize_t n = ::getrandom(out.data() + filled, out.size() - filled, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw IoError(fmt::format("getrandom: {}", std::strerror(errno)));
    filled += static_cast<std::size_t>(n);
  }
}

using byte_fields::get;
using byte_fields::put;

// Reads a decimal number up to `stop` in `text` from `at`; nothing when it is not one.
std::optional<long long> number_until(std::string_view text, std::size_t& at, char stop) {
  const auto end = text.find(stop, at);
  if (end == std::string_view::npos || end == at) return std::nullopt;
  long long value = -1;
  const auto [ptr, ec] = std::from_chars(text.data() + at, text.data() + end, value);
  if (ec != std::errc() || ptr != text.data() + end || value < 0) return std::nullopt;
  at = end + 1;
  return value;
}

// "/sgp-shm-PID-SENDER-RECEIVER-" and 32 lower-case hex digits, with these ranks.
bool valid_ring_name(std::string_view name, int sender, int receiver) {
  if (!name.starts_with(kNamePrefix)) return false;
  std::size_t at = kNamePrefix.size();
  const auto pid = number_until(name, at, '-');
  const auto from = number_until(name, at, '-');
  const auto to = number_until(name, at, '-');
  if (!pid || !from || !to || *from != sender || *to != receiver) return false;
  const std::string_view hex = name.substr(at);
  return hex.size() == 32 && std::ranges::all_of(hex, [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

}  // namespace

// One mapped object; unmapped (and its descriptor closed) on destruction.
struct ShmMapping {
  std::byte* base = nullptr;
  std::size_t size = 0;
  ShmMapping(std::byte* b, std::size_t s) : base(b), size(s) {}
  ~ShmMapping() {
    if (base) ::munmap(base, size);
  }
  RingHeader& header() const { return *reinterpret_cast<RingHeader*>(base); }
  std::byte* data() const { return base + kHeaderBytes; }
};

namespace {

// Maps `size` bytes of the open object `fd`, read-write, its page tables filled at once (no
// page faults in the first pushes); nothing when mmap fails.
std::unique_ptr<ShmMapping> map_object(int fd, std::size_t size) {
  void* base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (base == MAP_FAILED) return nullptr;
  return std::make_unique<ShmMapping>(static_cast<std::byte*>(base), size);
}

// Closes a file descriptor when it goes out of scope.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::array<std::byte, kShmDescriptorBytes> encode_shm_descriptor(const ShmDescriptor& d) {
  SGP_ENFORCE(d.name.size() < kNameField, "ring name '{}' longer than {} bytes", d.name,
              kNameField - 1);
  std::array<std::byte, kShmDescriptorBytes> out{};
  put(out, 0, kShmDescriptorMagic);
  put(out, 8, std::int32_t{d.sender});
  put(out, 12, std::int32_t{d.receiver});
  put(out, 16, d.position);
  put(out, 24, d.length);
  std::memcpy(out.data() + 32, d.token.data(), d.token.size());
  std::memcpy(out.data() + 48, d.name.data(), d.name.size());
  return out;
}

bool starts_with_shm_magic(std::span<const std::byte> bytes) {
  return bytes.size() >= 8 && get<std::uint64_t>(bytes, 0) == kShmDescriptorMagic;
}

std::optional<ShmDescriptor> decode_shm_descriptor(std::span<const std::byte> bytes) {
  if (bytes.size() < kShmDescriptorBytes || !starts_with_shm_magic(bytes)) return std::nullopt;
  ShmDescriptor d;
  d.sender = get<std::int32_t>(bytes, 8);
  d.receiver = get<std::int32_t>(bytes, 12);
  d.position = get<std::uint64_t>(bytes, 16);
  d.length = get<std::uint64_t>(bytes, 24);
  std::memcpy(d.token.data(), bytes.data() + 32, d.token.size());
  const auto* name = reinterpret_cast<const char*>(bytes.data() + 48);
  const std::size_t length = strnlen(name, kNameField);
  if (length == kNameField) return std::nullopt;  // no terminating NUL
  d.name.assign(name, length);
  return d;
}

std::string_view name_of(ShmRefusal refusal) {
  static constexpr std::array<std::string_view, kShmRefusals> kNames = {
      "bad_descriptor", "wrong_receiver", "wrong_sender", "bad_name",     "cannot_attach",
      "bad_object",     "bad_ring",       "wrong_token",  "out_of_bounds"};
  return kNames.at(static_cast<std::size_t>(refusal));
}

// ---- the sender's side ----

ShmRingWriter::ShmRingWriter(int sender, int receiver, std::size_t capacity)
    : capacity_(align_up(std::max<std::size_t>(capacity, kAlign))),
      sender_(sender),
      receiver_(receiver) {
  SGP_ENFORCE(capacity_ <= kMaxCapacity, "ring capacity {} over {}", capacity_, kMaxCapacity);
  std::array<std::byte, 16> suffix{};
  fill_random(suffix);
  fill_random(token_);
  name_ = fmt::format("{}{}-{}-{}-{:02x}", kNamePrefix, ::getpid(), sender, receiver,
                      fmt::join(reinterpret_cast<const std::uint8_t*>(suffix.data()),
                                reinterpret_cast<const std::uint8_t*>(suffix.data()) + 16, ""));
  const FdCloser fd{::shm_open(name_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600)};
  if (fd.fd < 0) {
    throw IoError(fmt::format("rank {}: cannot create the shared-memory ring {} for rank {}: {}",
                              sender, name_, receiver, std::strerror(errno)));
  }
  const std::size_t size = kHeaderBytes + capacity_;
  // posix_fallocate: a /dev/shm too small to hold the ring fails here, not as a SIGBUS later.
  const int err = ::posix_fallocate(fd.fd, 0, static_cast<off_t>(size));
  map_ = err == 0 ? map_object(fd.fd, size) : nullptr;
  if (!map_) {
    ::shm_unlink(name_.c_str());
    throw IoError(
        fmt::format("rank {}: cannot allocate the {}-byte shared-memory ring {} for rank "
                    "{}: {}",
                    sender, size, name_, receiver, std::strerror(err ? err : errno)));
  }
  RingHeader& h = map_->header();
  h.capacity = capacity_;
  h.sender = sender;
  h.receiver = receiver;
  h.token = token_;
  shared(h.magic).store(kRingMagic, std::memory_order_release);
}

ShmRingWriter::~ShmRingWriter() {
  if (!attached()) ::shm_unlink(name_.c_str());  // the receiver unlinks the name when it attaches
}

bool ShmRingWriter::attached() const {
  return shared(map_->header().attached).load(std::memory_order_acquire) != 0;
}

std::optional<ShmDescriptor> ShmRingWriter::write(std::span<const std::byte> payload) {
  RingHeader& h = map_->header();
  const std::uint64_t read = shared(h.read_position).load(std::memory_order_acquire);
  // A receiver that wrote nonsense gets no more of its payloads through the ring.
  if (read > head_ || head_ - read > capacity_) return std::nullopt;
  const std::uint64_t length = payload.size();
  const std::uint64_t offset = head_ % capacity_;
  const std::uint64_t skip = offset + length > capacity_ ? capacity_ - offset : 0;
  // Room: the new bytes must not reach the unread ones a lap later (none when the ring is empty).
  const bool empty = read == head_;
  if (length == 0 || align_up(length) > capacity_ ||
      (!empty && (head_ - read) + skip + align_up(length) > capacity_)) {
    return std::nullopt;
  }
  const std::uint64_t start = head_ + skip;
  std::memcpy(map_->data() + start % capacity_, payload.data(), length);
  head_ = start + align_up(length);
  shared(h.write_position).store(head_, std::memory_order_release);
  return ShmDescriptor{sender_, receiver_, start, length, token_, name_};
}

// ---- the receiver's side ----

namespace {

// Opens the object and checks it is a ring this receiver may read: a regular object of this
// user with mode 0600, a header page and a capacity that match, the descriptor's ranks and token.
std::unique_ptr<ShmMapping> open_ring(const ShmDescriptor& d, ShmRefusal& refusal) {
  const FdCloser fd{::shm_open(d.name.c_str(), O_RDWR | O_CLOEXEC, 0)};
  refusal = ShmRefusal::cannot_attach;
  if (fd.fd < 0) return nullptr;
  struct stat st {};
  refusal = ShmRefusal::bad_object;
  if (::fstat(fd.fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid() ||
      (st.st_mode & 07777) != 0600 || st.st_size <= static_cast<off_t>(kHeaderBytes) ||
      static_cast<std::uint64_t>(st.st_size) > kHeaderBytes + kMaxCapacity) {
    return nullptr;
  }
  auto map = map_object(fd.fd, static_cast<std::size_t>(st.st_size));
  refusal = ShmRefusal::cannot_attach;
  if (!map) return nullptr;
  RingHeader& h = map->header();
  refusal = ShmRefusal::bad_ring;
  if (shared(h.magic).load(std::memory_order_acquire) != kRingMagic ||
      h.capacity != map->size - kHeaderBytes || h.capacity % kAlign != 0 || h.sender != d.sender ||
      h.receiver != d.receiver) {
    return nullptr;
  }
  refusal = ShmRefusal::wrong_token;
  if (h.token != d.token) return nullptr;
  return map;
}

}  // namespace

ShmRingReader::Attached ShmRingReader::attach(const ShmDescriptor& d, int own_rank) {
  if (d.receiver != own_rank) return {nullptr, ShmRefusal::wrong_receiver};
  if (!valid_ring_name(d.name, d.sender, d.receiver)) return {nullptr, ShmRefusal::bad_name};
  ShmRefusal refusal = ShmRefusal::cannot_attach;
  auto map = open_ring(d, refusal);
  if (!map) return {nullptr, refusal};
  shared(map->header().attached).store(1, std::memory_order_release);
  ::shm_unlink(d.name.c_str());  // mapped now: nothing of it outlives both processes
  return {std::shared_ptr<ShmRingReader>(new ShmRingReader(std::move(map), d)), refusal};
}

ShmRingReader::ShmRingReader(std::unique_ptr<ShmMapping> map, const ShmDescriptor& d)
    : map_(std::move(map)), name_(d.name), token_(d.token) {}

ShmRingReader::~ShmRingReader() = default;

std::optional<std::span<const std::byte>> ShmRingReader::accept(const ShmDescriptor& d,
                                                                ShmRefusal& refusal) {
  RingHeader& h = map_->header();
  if (d.name != name_ || d.token != token_) {
    refusal = d.name != name_ ? ShmRefusal::wrong_sender : ShmRefusal::wrong_token;
    return std::nullopt;
  }
  const std::uint64_t capacity = h.capacity;
  const std::uint64_t written = shared(h.write_position).load(std::memory_order_acquire);
  // In bounds of the mapping, not before what was read, and written (published) already.
  const bool in_bounds = d.length > 0 && d.length <= capacity &&
                         d.position % capacity + d.length <= capacity && d.position >= expected_ &&
                         d.position - expected_ < capacity && d.position <= written &&
                         d.length <= written - d.position;
  if (!in_bounds) {
    refusal = ShmRefusal::out_of_bounds;
    return std::nullopt;
  }
  {
    const std::lock_guard lock(mutex_);
    // A skip to the start of the ring (or past a refused payload) is released at once.
    if (d.position > expected_) held_.push_back({expected_, d.position, true});
    held_.push_back({d.position, d.position + align_up(d.length), false});
  }
  expected_ = d.position + align_up(d.length);
  return std::span<const std::byte>(map_->data() + d.position % capacity, d.length);
}

void ShmRingReader::release(std::uint64_t position) {
  const std::lock_guard lock(mutex_);
  const auto it = std::ranges::find_if(
      held_, [&](const Held& held) { return held.begin == position && !held.released; });
  if (it == held_.end()) return;  // not held: nothing to give back (runs in destructors: no throw)
  it->released = true;
  std::uint64_t read = 0;
  bool moved = false;
  while (!held_.empty() && held_.front().released) {
    read = held_.front().end;
    moved = true;
    held_.pop_front();
  }
  if (moved) shared(map_->header().read_position).store(read, std::memory_order_release);
}

}  // namespace sgp::transport
