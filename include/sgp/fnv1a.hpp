#pragma once
// FNV-1a 64: sgp's file checksum (checkpoint files, the mixing-weights digest). Not a
// defence against tampering, only against damage; xxHash stays in the gossip module.
#include <cstdint>
#include <string_view>

namespace sgp {

inline std::uint64_t fnv1a(std::string_view bytes) {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) hash = (hash ^ c) * 0x100000001b3ull;
  return hash;
}

}  // namespace sgp
