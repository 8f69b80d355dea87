#pragma once
// Fixed-offset fields of binary headers (the gossip wire format and control messages, the
// shared-memory ring's descriptors): memcpy, so that no alignment is assumed. The host's byte
// order is used; little-endian is checked in gossip/wire_format.hpp.
#include <cstddef>
#include <cstring>
#include <span>

namespace sgp::byte_fields {

template <class T>
void put(std::span<std::byte> out, std::size_t offset, T value) {
  std::memcpy(out.data() + offset, &value, sizeof value);
}

template <class T>
T get(std::span<const std::byte> in, std::size_t offset) {
  T value;
  std::memcpy(&value, in.data() + offset, sizeof value);
  return value;
}

}  // namespace sgp::byte_fields
