#pragma once
// Fixed-offset little-endian fields of the gossip headers (wire_format.cpp, control_message.cpp):
// memcpy, so that no alignment is assumed. Little-endian is checked in wire_format.hpp.
#include <cstddef>
#include <cstring>
#include <span>

namespace sgp::gossip::detail {

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

}  // namespace sgp::gossip::detail
