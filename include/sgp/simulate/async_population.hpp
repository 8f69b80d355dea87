#pragma once
// N peers of asynchronous push-sum (the asgp algorithm) in one process, with the running-sum
// edges AsyncPushSum uses with --no-acked-pushes (gossip/running_sums.hpp; its default,
// acknowledged pushes, is not simulated) and the same round: apply the totals that
// have arrived, (the caller's step), push p_ji of (x, w) onto each out-edge's total, keep p_ii,
// send each total. Messages go through an in-process layer that loses, duplicates and delays
// them (link_faults.hpp); with running sums a lost or repeated total costs no mass, without
// them (plain push-sum) it does. Values are x in double (AsyncPushSum mixes a float32 z with its
// residual instead, to the same float64 precision: running_sums.hpp's HeldMass).
//
// Memory: x (N x D doubles) plus, per directed edge of the union graph, the sender's total and
// two send buffers and the receiver's applied total: 4 D doubles per edge. bytes() tells.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "sgp/gossip/running_sums.hpp"
#include "sgp/simulate/link_faults.hpp"
#include "sgp/simulate/peer_pool.hpp"
#include "sgp/topology/schedule.hpp"

namespace sgp::simulate {

struct MessageCounts {
  std::uint64_t sent = 0;        // totals handed to the message layer
  std::uint64_t lost = 0;        // dropped by it
  std::uint64_t duplicated = 0;  // delivered twice
  std::uint64_t skipped = 0;     // not sent: both of the edge's buffers were still in flight
  std::uint64_t stale = 0;       // delivered but older than what the edge had applied
  std::uint64_t applied = 0;
};

class AsyncPopulation {
 public:
  AsyncPopulation(topology::Schedule schedule, std::size_t dim, bool running_sums,
                  LinkFaults faults, PeerPool& pool);
  ~AsyncPopulation();

  // What the edges and x take for this schedule and dimension (before constructing it).
  static std::size_t bytes_needed(const topology::Schedule& schedule, std::size_t dim);

  int peers() const { return schedule_.num_peers(); }
  std::size_t dim() const { return dim_; }
  std::span<double> x(int rank) { return {x_.data() + offset(rank), dim_}; }
  const double* data() const { return x_.data(); }
  const std::vector<double>& weights() const { return w_; }

  // Start of round `round`: every peer applies the totals due by then.
  void deliver(std::int64_t round);
  // End of round `round`: every peer pushes and sends; the message layer decides each fate.
  void push(std::int64_t round);
  MessageCounts counts() const;

  // Membership changes (peer_changes.hpp). The schedule to push with from now on; an edge it
  // adds (a repair's bypass) gets its running sums when it is first used.
  void set_schedule(topology::Schedule schedule) { schedule_ = std::move(schedule); }
  // Every edge restarts its totals and what is in flight is given up (AsyncPushSum after an
  // exclusion: a new generation of totals, the old ones refused).
  void give_up_in_flight();
  // The rank's mass is gone: x = 0, w = 0.
  void remove(int rank);
  // x = x / w, w = 1.
  void restart_from_z(int rank);
  // The joiner gets half of the sponsor's x and w, the sponsor keeps the other half.
  void share(int sponsor, int joiner);

 private:
  struct InFlight {
    int sender = 0;
    std::int64_t sequence = 0;  // the sender's round
    std::int64_t due = 0;       // the round at whose start it is applied
    double weight = 0.0;
    std::shared_ptr<gossip::SendBuffer> buffer;
  };
  struct Peer {
    std::vector<std::pair<int, std::unique_ptr<gossip::OutEdge>>> out;  // by receiver
    std::vector<std::pair<int, std::unique_ptr<gossip::InEdge>>> in;    // by sender
    std::vector<InFlight> inbox;
    std::vector<std::pair<int, InFlight>> outbox;  // (receiver, message), routed after push
    MessageCounts counts;
  };
  std::size_t offset(int rank) const { return static_cast<std::size_t>(rank) * dim_; }
  gossip::OutEdge& out_edge(Peer& peer, int receiver);
  gossip::InEdge& in_edge(Peer& peer, int sender);
  void push_peer(int rank, std::int64_t round);
  void deliver_peer(int rank, std::int64_t round);

  topology::Schedule schedule_;
  std::size_t dim_;
  bool running_sums_;
  LinkFaults faults_;
  PeerPool& pool_;
  std::vector<double> x_;
  std::vector<double> w_;
  std::vector<Peer> peers_;
};

}  // namespace sgp::simulate
