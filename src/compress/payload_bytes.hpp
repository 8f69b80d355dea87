#pragma once
// Little-endian byte and bit streams for compressed payloads; a reader that runs past the end
// or finds a malformed varint throws PayloadError.
#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "sgp/compress/compressor.hpp"

namespace sgp::compress::detail {

static_assert(std::endian::native == std::endian::little, "payloads are little-endian");

[[noreturn]] void refuse(Refusal reason, const std::string& what);

class ByteWriter {
 public:
  explicit ByteWriter(std::size_t expected) { bytes_.reserve(expected); }
  template <typename T>
  void put(T value) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(&value);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
  }
  // LEB128: 7 bits a byte, the high bit set on every byte but the last.
  void varint(std::uint32_t value) {
    for (; value >= 0x80; value >>= 7) bytes_.push_back(static_cast<std::uint8_t>(value | 0x80));
    bytes_.push_back(static_cast<std::uint8_t>(value));
  }
  std::vector<std::uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<std::uint8_t> bytes_;
};

class ByteReader {
 public:
  explicit ByteReader(std::span<const std::uint8_t> bytes) : bytes_(bytes) {}
  template <typename T>
  T get() {
    T value;
    std::memcpy(&value, take(sizeof(T)).data(), sizeof(T));
    return value;
  }
  std::span<const std::uint8_t> take(std::size_t n) {
    if (n > bytes_.size() - at_) {
      refuse(Refusal::truncated,
             fmt::format("{} more bytes needed at byte {} of {}", n, at_, bytes_.size()));
    }
    const auto part = bytes_.subspan(at_, n);
    at_ += n;
    return part;
  }
  std::uint32_t varint() {
    std::uint64_t value = 0;
    for (int shift = 0; shift < 35; shift += 7) {
      const std::uint8_t byte = get<std::uint8_t>();
      value |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) {
        if (value > UINT32_MAX) break;
        return static_cast<std::uint32_t>(value);
      }
    }
    refuse(Refusal::bad_index, fmt::format("a varint index gap ending at byte {} is longer than "
                                           "32 bits",
                                           at_));
  }
  bool at_end() const { return at_ == bytes_.size(); }
  void finish() const {
    if (!at_end()) {
      refuse(Refusal::trailing_bytes,
             fmt::format("{} bytes left over after byte {}", bytes_.size() - at_, at_));
    }
  }

 private:
  std::span<const std::uint8_t> bytes_;
  std::size_t at_ = 0;
};

// Fields of `width` bits packed LSB first into bytes.
class BitWriter {
 public:
  explicit BitWriter(std::vector<std::uint8_t>& out) : out_(out) {}
  void put(std::uint32_t value, int width) {
    buffer_ |= static_cast<std::uint64_t>(value) << filled_;
    filled_ += width;
    for (; filled_ >= 8; filled_ -= 8, buffer_ >>= 8) {
      out_.push_back(static_cast<std::uint8_t>(buffer_));
    }
  }
  void flush() {
    if (filled_ > 0) out_.push_back(static_cast<std::uint8_t>(buffer_));
    buffer_ = 0;
    filled_ = 0;
  }

 private:
  std::vector<std::uint8_t>& out_;
  std::uint64_t buffer_ = 0;
  int filled_ = 0;
};

class BitReader {
 public:
  explicit BitReader(std::span<const std::uint8_t> bytes) : bytes_(bytes) {}
  std::uint32_t get(int width) {
    while (filled_ < width) {
      buffer_ |= static_cast<std::uint64_t>(bytes_[next_++]) << filled_;
      filled_ += 8;
    }
    const auto value = static_cast<std::uint32_t>(buffer_ & ((std::uint64_t{1} << width) - 1));
    buffer_ >>= width;
    filled_ -= width;
    return value;
  }
  // The bits of the last byte that no field used are zero.
  bool padding_is_zero() const { return buffer_ == 0; }

 private:
  std::span<const std::uint8_t> bytes_;
  std::size_t next_ = 0;
  std::uint64_t buffer_ = 0;
  int filled_ = 0;
};

// Uniform in [0, 1) at position i of the SplitMix64 stream of `seed` (the same at both ends).
double uniform_at(std::uint64_t seed, std::uint64_t i);
// randk's indices: exactly k of 0..n-1, ascending, from the seed alone.
std::vector<std::uint32_t> random_indices(std::uint64_t seed, std::size_t n, std::size_t k);
// QSGD's value of a level, norm * level / levels with the sign: the same float32 at both ends.
float qsgd_value(float norm, std::uint32_t level, std::uint32_t levels, bool negative);

// Bytes that hold `count` fields of `width` bits.
inline std::size_t packed_bytes(std::size_t count, int width) {
  return (count * static_cast<std::size_t>(width) + 7) / 8;
}

}  // namespace sgp::compress::detail
