#include "sgp/gossip/membership.hpp"

#include <algorithm>
#include <cstring>

namespace sgp::gossip {

namespace {
constexpr std::size_t kEntryBytes = 5;
}

std::string_view state_name(PeerState state) {
  switch (state) {
    case PeerState::live:
      return "live";
    case PeerState::excluded:
      return "excluded";
    case PeerState::done:
      return "done";
    case PeerState::left:
      return "left";
  }
  return "?";
}

Membership::Membership(int num_peers)
    : states_(num_peers, PeerState::live), incarnations_(num_peers, 0) {}

std::vector<bool> Membership::live_flags() const {
  std::vector<bool> out;
  for (auto s : states_) out.push_back(s == PeerState::live);
  return out;
}

int Membership::live_count() const {
  return static_cast<int>(std::count(states_.begin(), states_.end(), PeerState::live));
}

bool Membership::apply(int rank, PeerState state, std::uint32_t incarnation) {
  if (state == PeerState::live) {
    if (incarnation <= incarnations_[rank]) return false;
    incarnations_[rank] = incarnation;
    states_[rank] = PeerState::live;
    return true;
  }
  if (incarnation != incarnations_[rank] || states_[rank] == state) return false;
  const bool may_change = states_[rank] == PeerState::live ||
                          (states_[rank] == PeerState::done && state == PeerState::left);
  if (!may_change) return false;
  states_[rank] = state;
  return true;
}

std::vector<std::byte> Membership::encode() const {
  std::vector<std::byte> out(states_.size() * kEntryBytes);
  for (std::size_t r = 0; r < states_.size(); ++r) {
    out[r * kEntryBytes] = static_cast<std::byte>(states_[r]);
    std::memcpy(out.data() + r * kEntryBytes + 1, &incarnations_[r], 4);
  }
  return out;
}

std::optional<Membership> Membership::decode(std::span<const std::byte> bytes, int num_peers) {
  if (bytes.size() != static_cast<std::size_t>(num_peers) * kEntryBytes) return std::nullopt;
  Membership m(num_peers);
  for (int r = 0; r < num_peers; ++r) {
    const auto state = static_cast<std::uint8_t>(bytes[r * kEntryBytes]);
    if (state > static_cast<std::uint8_t>(PeerState::left)) return std::nullopt;
    m.states_[r] = static_cast<PeerState>(state);
    std::memcpy(&m.incarnations_[r], bytes.data() + r * kEntryBytes + 1, 4);
  }
  return m;
}

}  // namespace sgp::gossip
