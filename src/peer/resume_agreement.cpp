#include "sgp/peer/resume_agreement.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "sgp/error.hpp"
#include "sgp/gossip/control_message.hpp"
#include "sgp/topology/schedule.hpp"

namespace sgp::peer {

namespace {

using Clock = std::chrono::steady_clock;
using Lists = std::map<int, std::vector<std::int64_t>>;  // rank -> its checkpoint iterations
struct Offer {
  int sender = 0;
  Lists lists;
};
using EarlyOffers = std::multimap<std::int64_t, Offer>;  // by exchange round

template <class T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

std::string encode(const Lists& lists) {
  std::string out;
  for (const auto& [rank, iterations] : lists) {
    put<std::int32_t>(out, rank);
    put<std::uint32_t>(out, static_cast<std::uint32_t>(iterations.size()));
    for (std::int64_t it : iterations) put<std::int64_t>(out, it);
  }
  return out;
}

// The lists in an offer, or nothing when it is malformed.
std::optional<Lists> decode(std::span<const std::byte> bytes, int num_peers) {
  Lists lists;
  std::size_t at = 0;
  auto take = [&](auto& value) {
    if (bytes.size() - at < sizeof value) return false;
    std::memcpy(&value, bytes.data() + at, sizeof value);
    at += sizeof value;
    return true;
  };
  while (at < bytes.size()) {
    std::int32_t rank = 0;
    std::uint32_t count = 0;
    if (!take(rank) || !take(count) || rank < 0 || rank >= num_peers || lists.count(rank) ||
        count > (bytes.size() - at) / sizeof(std::int64_t)) {
      return std::nullopt;
    }
    auto& iterations = lists[rank];
    iterations.resize(count);
    for (auto& it : iterations) take(it);
  }
  return lists;
}

// A rank's own list, heard from that rank, replaces whatever a relay said of it.
void take_offer(Lists& lists, int sender, Lists heard) {
  if (const auto own = heard.find(sender); own != heard.end()) lists[sender] = own->second;
  lists.merge(heard);
}

void send_offer(transport::Transport& t, int dest, int rank, std::int64_t round,
                const Lists& lists) {
  gossip::ControlMessage m;
  m.kind = gossip::ControlKind::resume_offer;
  m.sender = m.subject = rank;
  m.round = round;
  const auto header = gossip::encode_control(m);
  auto payload = std::make_shared<const std::string>(encode(lists));
  t.send(dest, std::as_bytes(std::span(header)), std::as_bytes(std::span(*payload)), [payload] {});
}

// Collects the offers of exchange round `round` from every one of `senders` into `lists`;
// offers of later rounds wait in `early`, other messages go back to the transport.
void receive_round(transport::ReplayTransport& t, int rank, int num_peers, std::int64_t round,
                   std::set<int> senders, Lists& lists, EarlyOffers& early,
                   std::chrono::milliseconds timeout) {
  for (auto [it, end] = early.equal_range(round); it != end; ++it) {
    if (senders.erase(it->second.sender)) take_offer(lists, it->second.sender, it->second.lists);
  }
  const auto deadline = Clock::now() + timeout;
  while (!senders.empty()) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    auto message = left.count() > 0 ? t.inner().receive(left) : std::nullopt;
    if (!message) {
      throw IoError(fmt::format(
          "--resume: rank {}: no list of checkpoints from ranks {} within {} ms (peer not "
          "started, dead or too slow)",
          rank, fmt::join(senders, ", "), timeout.count()));
    }
    const auto decoded = gossip::is_control(*message)
                             ? gossip::decode_control(*message, num_peers, rank)
                             : std::variant<gossip::DecodedControl, gossip::RejectCause>{};
    // decode_control bound the offer to the key it came with: a forged one is dropped here.
    if (const auto* cause = std::get_if<gossip::RejectCause>(&decoded);
        cause && (*cause == gossip::RejectCause::sender_mismatch ||
                  *cause == gossip::RejectCause::not_entitled)) {
      const auto key = message->authenticated_rank();
      spdlog::warn("--resume: rank {}: refused a control notice ({}) from {}", rank,
                   gossip::reject_cause_name(*cause),
                   key ? fmt::format("the key of rank {}", *key) : std::string("a peer"));
      continue;
    }
    const auto* offer = std::get_if<gossip::DecodedControl>(&decoded);
    if (!offer || offer->control.kind != gossip::ControlKind::resume_offer) {
      t.put_back(std::move(*message));
      continue;
    }
    auto heard = decode(offer->payload, num_peers);
    if (!heard) {
      throw IoError(fmt::format("--resume: rank {} sent a malformed list of checkpoints",
                                offer->control.sender));
    }
    if (offer->control.round > round) {
      early.emplace(offer->control.round, Offer{offer->control.sender, std::move(*heard)});
    }
    if (offer->control.round != round || !senders.erase(offer->control.sender)) continue;
    take_offer(lists, offer->control.sender, std::move(*heard));
  }
}

}  // namespace

std::optional<std::int64_t> newest_common_iteration(
    const std::vector<std::vector<std::int64_t>>& per_rank) {
  std::set<std::int64_t> common(per_rank.front().begin(), per_rank.front().end());
  bool any = false;
  for (const auto& iterations : per_rank) {
    any |= !iterations.empty();
    std::set<std::int64_t> both;
    for (std::int64_t it : iterations)
      if (common.count(it)) both.insert(it);
    common = std::move(both);
  }
  if (!common.empty()) return *common.rbegin();
  if (!any) return std::nullopt;
  std::vector<std::string> each;
  for (std::size_t rank = 0; rank < per_rank.size(); ++rank) {
    each.push_back(fmt::format("rank {} has {}", rank,
                               per_rank[rank].empty()
                                   ? std::string("none")
                                   : fmt::format("{}", fmt::join(per_rank[rank], ", "))));
  }
  throw InputError(fmt::format(
      "--resume: no checkpoint iteration that every rank has ({}); resume where each rank's "
      "checkpoints are, or start again with --overwrite",
      fmt::join(each, "; ")));
}

std::optional<std::int64_t> agree_resume_iteration(transport::ReplayTransport& transport,
                                                   const topology::Schedule& schedule, int rank,
                                                   std::vector<std::int64_t> mine,
                                                   std::chrono::milliseconds timeout) {
  const int n = schedule.num_peers();
  const auto out = schedule.all_out_neighbors(rank);
  const auto in = schedule.all_in_neighbors(rank);
  Lists lists = {{rank, std::move(mine)}};
  EarlyOffers early;
  for (std::int64_t round = 0; round + 1 < n; ++round) {
    for (int dest : out) send_offer(transport, dest, rank, round, lists);
    receive_round(transport, rank, n, round, {in.begin(), in.end()}, lists, early, timeout);
  }
  std::vector<std::vector<std::int64_t>> per_rank(n);
  for (int r = 0; r < n; ++r) {
    SGP_ENFORCE(lists.count(r), "rank {} heard nothing of rank {} in {} rounds", rank, r, n - 1);
    per_rank[r] = lists[r];
  }
  return newest_common_iteration(per_rank);
}

}  // namespace sgp::peer
