#include "sgp/simulate/peer_changes.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "sgp/error.hpp"
#include "sgp/topology/repair.hpp"

namespace sgp::simulate {
namespace {

template <typename T>
bool parse_number(std::string_view text, T& out) {
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end && !text.empty();
}

PeerChange parse_one(std::string_view item, PeerChange::Kind kind, const std::string& flag) {
  PeerChange c;
  c.kind = kind;
  c.item = fmt::format("{} {}", flag, item);
  const auto at = item.find('@');
  if (at == std::string_view::npos || !parse_number(item.substr(0, at), c.rank) ||
      !parse_number(item.substr(at + 1), c.round)) {
    throw InputError(fmt::format(
        "{}: expected RANK@ROUND (e.g. {} 3@100: rank 3 at the start of round 100), items "
        "separated by commas",
        c.item, flag));
  }
  return c;
}

// Fails of this step, then joins in rank order; each checked against the live set so far.
void apply_change(const PeerChange& c, MembershipStep& step, int peers) {
  if (c.kind == PeerChange::Kind::fail) {
    if (!step.live[static_cast<std::size_t>(c.rank)]) {
      throw InputError(fmt::format("{}: rank {} is not live at round {} (it failed before)", c.item,
                                   c.rank, c.round));
    }
    step.live[static_cast<std::size_t>(c.rank)] = false;
    step.failed.push_back(c.rank);
    return;
  }
  const bool failed_now =
      std::find(step.failed.begin(), step.failed.end(), c.rank) != step.failed.end();
  if (step.live[static_cast<std::size_t>(c.rank)] || failed_now) {
    throw InputError(fmt::format(
        "{}: rank {} is live at round {} (a join restarts a rank that failed in an earlier round)",
        c.item, c.rank, c.round));
  }
  int sponsor = -1;
  for (int k = 1; k < peers && sponsor < 0; ++k) {
    const int r = (c.rank + k) % peers;
    if (step.live[static_cast<std::size_t>(r)]) sponsor = r;
  }
  if (sponsor < 0) {
    throw InputError(fmt::format("{}: no live peer is left to sponsor rank {}", c.item, c.rank));
  }
  step.live[static_cast<std::size_t>(c.rank)] = true;
  step.joined.emplace_back(c.rank, sponsor);
}

}  // namespace

std::vector<PeerChange> parse_peer_changes(const std::string& text, PeerChange::Kind kind,
                                           const std::string& flag) {
  std::vector<PeerChange> out;
  std::string_view rest(text);
  while (true) {
    const auto comma = rest.find(',');
    out.push_back(parse_one(rest.substr(0, comma), kind, flag));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return out;
}

std::vector<MembershipStep> plan_membership(const topology::Schedule& schedule,
                                            std::vector<PeerChange> changes, std::int64_t rounds) {
  const int n = schedule.num_peers();
  for (const auto& c : changes) {
    if (c.rank < 0 || c.rank >= n) {
      throw InputError(
          fmt::format("{}: rank {} is not one of the {} peers (0..{})", c.item, c.rank, n, n - 1));
    }
    if (c.round < 0 || c.round >= rounds) {
      throw InputError(fmt::format("{}: round {} is not within the run's rounds (0..{})", c.item,
                                   c.round, rounds - 1));
    }
  }
  std::stable_sort(changes.begin(), changes.end(), [](const PeerChange& a, const PeerChange& b) {
    return std::tuple(a.round, a.kind != PeerChange::Kind::fail, a.rank) <
           std::tuple(b.round, b.kind != PeerChange::Kind::fail, b.rank);
  });
  std::vector<MembershipStep> steps;
  std::vector<bool> live(static_cast<std::size_t>(n), true);
  for (std::size_t i = 0; i < changes.size();) {
    MembershipStep step{changes[i].round, {}, {}, live, schedule};
    std::size_t j = i;
    for (; j < changes.size() && changes[j].round == step.round; ++j) {
      apply_change(changes[j], step, n);
    }
    try {
      step.mixing = topology::repair_schedule(schedule, step.live);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: {}", changes[j - 1].item, e.what()));
    }
    live = step.live;
    steps.push_back(std::move(step));
    i = j;
  }
  return steps;
}

}  // namespace sgp::simulate
