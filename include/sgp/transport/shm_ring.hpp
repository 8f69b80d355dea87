#pragma once
// One edge's ring in POSIX shared memory: the sender copies payloads into it, the receiver reads
// them in place and hands each back when the engine releases it (ShmTransport, shm_transport.hpp,
// says how the rings travel with the ZeroMQ messages; docs/transport.md the design).
//
// The object (/dev/shm/sgp-shm-PID-SENDER-RECEIVER-HEX, created by the sender with O_EXCL and
// mode 0600 under a random name, filled with posix_fallocate so that a full /dev/shm is an
// error at creation and never a SIGBUS later) holds a header page and `capacity` bytes of data:
//
//   header: magic "SGPRING1", capacity (u64), sender (i32), receiver (i32), a random 16-byte
//           token, the receiver's attached flag, the write position (the sender's, a release
//           store once a payload is in) and the read position (the receiver's, the end of the
//           oldest payload it still holds), each on its own cache line.
//
// Positions count bytes since the ring was made and never wrap (u64); the data of position p is
// at p % capacity. A payload never straddles the end: when it would not fit before the end, the
// sender skips to the start. Payloads start on 64-byte boundaries.
//
// Nothing here trusts the other side: the reader checks a descriptor against the object (owner,
// mode, size, magic, ranks, token) and its span against the ring's bounds and write position
// before it reads a byte; the writer treats a read position that makes no sense as a full ring.
#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace sgp::transport {

struct ShmMapping;  // an mmap'ed object (shm_ring.cpp)

// Where one payload lies in a ring, as its sender announces it (ShmTransport sends it as the
// first bytes of the message's header frame).
struct ShmDescriptor {
  int sender = -1;
  int receiver = -1;
  std::uint64_t position = 0;  // the payload's first byte
  std::uint64_t length = 0;    // bytes
  std::array<std::byte, 16> token{};
  std::string name;  // the object's name, "/sgp-shm-..."
};

inline constexpr std::size_t kShmDescriptorBytes = 128;
// The descriptor's first 8 bytes; no other frame sgp sends starts with them.
inline constexpr std::uint64_t kShmDescriptorMagic = 0x3130445348534753ULL;  // "SGSHSD01"

std::array<std::byte, kShmDescriptorBytes> encode_shm_descriptor(const ShmDescriptor& d);
// The descriptor at the start of `bytes`, or nothing when its size, magic or name field is wrong.
std::optional<ShmDescriptor> decode_shm_descriptor(std::span<const std::byte> bytes);
bool starts_with_shm_magic(std::span<const std::byte> bytes);

// Why a descriptor was refused (never read); the names are what ShmStats counts.
enum class ShmRefusal {
  bad_descriptor,  // size, magic, or a frame layout other than [descriptor + header, empty]
  wrong_receiver,  // names another receiver
  wrong_sender,    // names another sender than the one authenticated, or another ring
  bad_name,        // not /sgp-shm-PID-SENDER-RECEIVER-HEX32 with these ranks
  cannot_attach,   // shm_open or mmap failed (e.g. the object is gone)
  bad_object,      // not a regular file of this user with mode 0600 and a ring's size
  bad_ring,        // the ring header's magic, capacity or ranks do not match
  wrong_token,     // the descriptor's token is not the ring's
  out_of_bounds,   // the span is empty, straddles the end, overlaps what was read or is unwritten
};
std::string_view name_of(ShmRefusal refusal);
inline constexpr int kShmRefusals = 9;

// The sender's side of one edge's ring.
class ShmRingWriter {
 public:
  // Creates the object; IoError naming it when /dev/shm refuses (full, not mounted, ...).
  // `capacity` is rounded up to 64 bytes.
  ShmRingWriter(int sender, int receiver, std::size_t capacity);
  ~ShmRingWriter();  // unmaps, and unlinks the name unless the receiver did
  ShmRingWriter(const ShmRingWriter&) = delete;
  ShmRingWriter& operator=(const ShmRingWriter&) = delete;

  // Copies `payload` in and returns its descriptor, or nothing when the ring has no room now
  // (the caller sends the payload another way).
  std::optional<ShmDescriptor> write(std::span<const std::byte> payload);
  // Whether the receiver has attached (and unlinked the name).
  bool attached() const;
  const std::string& name() const { return name_; }
  std::size_t capacity() const { return capacity_; }

 private:
  std::unique_ptr<ShmMapping> map_;
  std::string name_;
  std::size_t capacity_;
  std::array<std::byte, 16> token_{};
  int sender_, receiver_;
  std::uint64_t head_ = 0;  // the write position (the shared one is its published copy)
};

// The receiver's side of one edge's ring. Thread-safe: release() runs wherever the engine drops
// a message.
class ShmRingReader {
 public:
  struct Attached {
    std::shared_ptr<ShmRingReader> reader;  // null when refused
    ShmRefusal refusal = ShmRefusal::cannot_attach;
  };
  // Opens and maps the object `d` names after checking the name (for receiver `own_rank`), the
  // object and the ring header against `d`; then marks the ring attached and unlinks its name.
  static Attached attach(const ShmDescriptor& d, int own_rank);
  ~ShmRingReader();
  ShmRingReader(const ShmRingReader&) = delete;
  ShmRingReader& operator=(const ShmRingReader&) = delete;

  // The payload `d` announces, held until release(d.position), or the refusal (nothing read).
  // Called by one thread (the transport's receiver).
  std::optional<std::span<const std::byte>> accept(const ShmDescriptor& d, ShmRefusal& refusal);
  // The engine is done with the payload at `position`: the read position moves past every
  // payload released so far in order.
  void release(std::uint64_t position);
  const std::string& name() const { return name_; }

 private:
  ShmRingReader(std::unique_ptr<ShmMapping> map, const ShmDescriptor& d);
  struct Held {
    std::uint64_t begin, end;
    bool released;
  };
  std::unique_ptr<ShmMapping> map_;
  std::string name_;
  std::array<std::byte, 16> token_;
  std::uint64_t expected_ = 0;  // where the next payload may start
  std::mutex mutex_;            // guards held_ (release() runs on any thread)
  std::deque<Held> held_;
};

}  // namespace sgp::transport
