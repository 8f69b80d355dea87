#include "sgp/simulate/async_population.hpp"

#include <algorithm>
#include <tuple>

#include "sgp/error.hpp"

namespace sgp::simulate {
namespace {

template <typename Edge>
Edge* find_edge(std::vector<std::pair<int, std::unique_ptr<Edge>>>& edges, int peer) {
  for (auto& [p, edge] : edges) {
    if (p == peer) return edge.get();
  }
  return nullptr;
}

}  // namespace

// Edges are made up front for the schedule's union graph, and on first use for the ones a
// repaired schedule adds (each peer's own edges: only its own thread touches them).
gossip::OutEdge& AsyncPopulation::out_edge(Peer& peer, int receiver) {
  if (auto* edge = find_edge(peer.out, receiver)) return *edge;
  peer.out.emplace_back(receiver, std::make_unique<gossip::OutEdge>(dim_, 0));
  return *peer.out.back().second;
}

gossip::InEdge& AsyncPopulation::in_edge(Peer& peer, int sender) {
  if (auto* edge = find_edge(peer.in, sender)) return *edge;
  peer.in.emplace_back(sender, std::make_unique<gossip::InEdge>(dim_, 1, 0));
  return *peer.in.back().second;
}

AsyncPopulation::AsyncPopulation(topology::Schedule schedule, std::size_t dim, bool running_sums,
                                 LinkFaults faults, PeerPool& pool)
    : schedule_(std::move(schedule)),
      dim_(dim),
      running_sums_(running_sums),
      faults_(faults),
      pool_(pool),
      x_(static_cast<std::size_t>(schedule_.num_peers()) * dim, 0.0),
      w_(static_cast<std::size_t>(schedule_.num_peers()), 1.0),
      peers_(static_cast<std::size_t>(schedule_.num_peers())) {
  SGP_ENFORCE(dim > 0, "the simulated vector is empty");
  pool_.for_ranges(peers_.size(), [&](int, std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      const int rank = static_cast<int>(i);
      for (int j : schedule_.all_out_neighbors(rank)) {
        peers_[i].out.emplace_back(j, std::make_unique<gossip::OutEdge>(dim_, 0));
      }
      for (int j : schedule_.all_in_neighbors(rank)) {
        peers_[i].in.emplace_back(j, std::make_unique<gossip::InEdge>(dim_, 1, 0));
      }
    }
  });
}

AsyncPopulation::~AsyncPopulation() = default;

std::size_t AsyncPopulation::bytes_needed(const topology::Schedule& schedule, std::size_t dim) {
  std::size_t edges = 0;
  for (int r = 0; r < schedule.num_peers(); ++r) edges += schedule.all_out_neighbors(r).size();
  // Per element: x (8 bytes) per peer; per edge the sender's total and base (16), its two send
  // buffers (2 x 12: a float64 total or a float32 delta) and the receiver's base and delta (12).
  return (static_cast<std::size_t>(schedule.num_peers()) * 8 + 52 * edges) * dim;
}

void AsyncPopulation::deliver(std::int64_t round) {
  pool_.for_ranges(peers_.size(), [&](int, std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) deliver_peer(static_cast<int>(i), round);
  });
}

// In a fixed order (due round, sender, sequence), so that a run does not depend on threads.
void AsyncPopulation::deliver_peer(int rank, std::int64_t round) {
  auto& peer = peers_[static_cast<std::size_t>(rank)];
  auto due_end = std::partition(peer.inbox.begin(), peer.inbox.end(),
                                [&](const InFlight& m) { return m.due <= round; });
  std::sort(peer.inbox.begin(), due_end, [](const InFlight& a, const InFlight& b) {
    return std::tie(a.due, a.sender, a.sequence) < std::tie(b.due, b.sender, b.sequence);
  });
  double& w = w_[static_cast<std::size_t>(rank)];
  for (auto it = peer.inbox.begin(); it != due_end; ++it) {
    auto& edge = in_edge(peer, it->sender);
    const auto& b = *it->buffer;
    const gossip::InEdge::Chunk chunk{b.dtype, 0, it->sequence, 0, b.payload(0, dim_), it->weight};
    const bool applied = edge.apply(running_sums_, chunk, x(rank), w) == gossip::Applied::yes;
    ++(applied ? peer.counts.applied : peer.counts.stale);
    it->buffer->chunks_on_wire.fetch_sub(1, std::memory_order_acq_rel);
  }
  peer.inbox.erase(peer.inbox.begin(), due_end);
}

void AsyncPopulation::push(std::int64_t round) {
  pool_.for_ranges(peers_.size(), [&](int, std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) push_peer(static_cast<int>(i), round);
  });
  // Routing touches other peers' inboxes: one thread, after every push.
  for (auto& sender : peers_) {
    for (auto& [receiver, message] : sender.outbox) {
      peers_[static_cast<std::size_t>(receiver)].inbox.push_back(std::move(message));
    }
    sender.outbox.clear();
  }
}

// AsyncPushSum::push_round and send_total, with the message layer in place of a transport.
void AsyncPopulation::push_peer(int rank, std::int64_t round) {
  auto& peer = peers_[static_cast<std::size_t>(rank)];
  auto xs = x(rank);
  double& w = w_[static_cast<std::size_t>(rank)];
  const auto& edges = schedule_.out_edges(rank, round);
  for (const auto& e : edges) out_edge(peer, e.peer).push(e.weight, xs, w);
  const double keep = schedule_.self_weight(rank, round);
  for (double& v : xs) v *= keep;
  w *= keep;
  for (const auto& e : edges) {
    double weight = 0.0;
    // Float64 totals every round (exact: what a finished peer sends), not the engine's float32
    // deltas: the simulator studies mixing, and its consensus is exact to float64 rounding.
    auto buffer = out_edge(peer, e.peer).snapshot(running_sums_, true, round, 1, weight);
    if (!buffer) {
      ++peer.counts.skipped;
      continue;
    }
    ++peer.counts.sent;
    const MessageFate fate = message_fate(faults_, round, rank, e.peer);
    if (fate.copies == 0) {
      ++peer.counts.lost;
      buffer->chunks_on_wire.fetch_sub(1, std::memory_order_acq_rel);  // the layer dropped it
      continue;
    }
    if (fate.copies == 2) {
      ++peer.counts.duplicated;
      buffer->chunks_on_wire.fetch_add(1, std::memory_order_acq_rel);
    }
    for (int c = 0; c < fate.copies; ++c) {
      peer.outbox.emplace_back(e.peer,
                               InFlight{rank, round, round + 1 + fate.delay[c], weight, buffer});
    }
  }
}

MessageCounts AsyncPopulation::counts() const {
  MessageCounts total;
  for (const auto& p : peers_) {
    total.sent += p.counts.sent;
    total.lost += p.counts.lost;
    total.duplicated += p.counts.duplicated;
    total.skipped += p.counts.skipped;
    total.stale += p.counts.stale;
    total.applied += p.counts.applied;
  }
  return total;
}

void AsyncPopulation::give_up_in_flight() {
  for (auto& peer : peers_) {
    peer.out.clear();
    peer.in.clear();
    peer.inbox.clear();
  }
}

void AsyncPopulation::remove(int rank) {
  std::fill(x(rank).begin(), x(rank).end(), 0.0);
  w_[static_cast<std::size_t>(rank)] = 0.0;
}

void AsyncPopulation::restart_from_z(int rank) {
  double& w = w_[static_cast<std::size_t>(rank)];
  SGP_ENFORCE(w > 0.0, "rank {} restarts from z with w = {}", rank, w);
  const double inverse = 1.0 / w;
  for (double& v : x(rank)) v *= inverse;
  w = 1.0;
}

void AsyncPopulation::share(int sponsor, int joiner) {
  auto from = x(sponsor);
  auto to = x(joiner);
  for (std::size_t k = 0; k < dim_; ++k) to[k] = from[k] *= 0.5;
  w_[static_cast<std::size_t>(joiner)] = w_[static_cast<std::size_t>(sponsor)] *= 0.5;
}

}  // namespace sgp::simulate
