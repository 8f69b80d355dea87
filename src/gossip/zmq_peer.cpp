#include "sgp/gossip/zmq_peer.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include <fmt/std.h>

#include "sgp/endpoint.hpp"
#include "sgp/error.hpp"

namespace sgp::gossip {
namespace {

// Keys in the topology need --keys; --keys needs keys in the topology.
void check_keys_flag(const topology::Schedule& schedule, const Security& security) {
  if (schedule.has_public_keys() && security.keys_dir.empty()) {
    throw InputError(
        "the topology has public keys (CURVE): give --keys DIR, the directory `sgp keygen` wrote "
        "this process's secret key to");
  }
  if (!schedule.has_public_keys() && !security.keys_dir.empty()) {
    throw InputError(fmt::format(
        "--keys {}: the topology has no public_key attributes; use the topology `sgp keygen "
        "--out` wrote",
        security.keys_dir));
  }
}

// Without keys: refuse non-loopback endpoints unless --insecure (then say so once).
void check_plain_endpoints(const std::vector<std::string>& endpoints, const Security& security,
                           const std::string& who) {
  const auto open = std::find_if(endpoints.begin(), endpoints.end(), [&who](const std::string& e) {
    return !Endpoint::parse(e, who).is_loopback();
  });
  if (open == endpoints.end()) return;
  if (!security.insecure) {
    throw InputError(fmt::format(
        "{}: endpoint {} is not a loopback address and the topology has no keys: anyone who can "
        "reach it could pose as a peer. Add keys (`sgp keygen --topology IN --keys DIR --out "
        "OUT`, then --keys DIR), or pass --insecure to run unauthenticated anyway",
        who, *open));
  }
  spdlog::warn("{}: --insecure: no CURVE keys, so anyone who can reach {} can send messages", who,
               *open);
}

// Every peer must know where the others listen: a tcp endpoint without a port number (0 or *) is
// for `sgp launch`, which picks a free port for each rank it starts and gives the peers the
// topology with that port.
void check_port_numbers(const topology::Schedule& schedule, int rank, const std::vector<int>& out) {
  std::vector<int> ranks = {rank};
  ranks.insert(ranks.end(), out.begin(), out.end());
  for (int r : ranks) {
    const auto e = Endpoint::parse(schedule.endpoint(r), fmt::format("rank {}'s endpoint", r));
    if (!e.leaves_port_open()) continue;
    throw InputError(fmt::format(
        "rank {}'s endpoint {} has no port number: port {} is for `sgp launch`, which picks a "
        "free port for each rank it starts; a peer started by hand needs the ports, e.g. from "
        "the topology that launch wrote to its run directory",
        r, e.text(), e.port));
  }
}

transport::CurveKeyPair own_keys(const topology::Schedule& schedule, int rank,
                                 const Security& security) {
  auto keys = transport::read_curve_keypair(security.keys_dir, fmt::format("peer-{}", rank));
  if (keys.public_key != schedule.public_key(rank)) {
    throw InputError(fmt::format(
        "{}/peer-{}.key does not belong to node {} of the topology (its public key differs from "
        "the node's public_key: keys and topology from different `sgp keygen` runs?)",
        security.keys_dir, rank, rank));
  }
  return keys;
}

// PLAIN with this run's passwords: admit `senders`, present a password to each of `out`.
transport::ZmqPlain plain_options(const RunCredentials& credentials, int rank,
                                  const std::vector<int>& senders, const std::vector<int>& out) {
  if (credentials.rank != rank) {
    throw InputError(fmt::format("--run-credentials: the file is rank {}'s, not rank {}'s",
                                 credentials.rank, rank));
  }
  auto password = [&](const std::map<int, std::string>& table, int other) {
    const auto it = table.find(other);
    if (it == table.end()) {
      throw InputError(
          fmt::format("--run-credentials: rank {} has no password for rank {}", rank, other));
    }
    return it->second;
  };
  transport::ZmqPlain plain;
  for (int sender : senders) plain.server.admitted[sender] = password(credentials.admit, sender);
  for (int dest : out) plain.passwords[dest] = password(credentials.present, dest);
  return plain;
}

}  // namespace

transport::ReceiveLimits push_sum_receive_limits(const Chunking& chunking, Mode mode,
                                                 int num_peers) {
  if (mode == Mode::async) {
    const std::uint64_t mass_transfer = (chunking.total + 1) * sizeof(double) + 8 * num_peers;
    const std::uint64_t chunk = chunking.per_chunk * sizeof(double);
    // A sender has at most one message per edge on the wire (it skips a send while the last is
    // still going out), plus membership notices and a mass transfer.
    return {static_cast<std::int64_t>(std::max({kHeaderBytes, chunk, mass_transfer})),
            static_cast<int>(chunking.chunks() + 8)};
  }
  return {static_cast<std::int64_t>(
              std::max<std::uint64_t>(kHeaderBytes, chunking.per_chunk * sizeof(float))),
          // One round, plus one: with CURVE, a queue of one message never delivers anything
          // (measured with libzmq 4.3.4; ZAP's metadata seems to take a place).
          static_cast<int>(chunking.chunks() + 1)};
}

namespace {

// Whom `rank` sends to (`hop` 1) or receives from (`hop` -1): its neighbours over the period,
// (async) everyone, or (allreduce) its ring neighbour rank + hop; with `ring_too`, the ring
// neighbour besides the neighbours (periodic exact averages).
std::vector<int> ranks_or_all(const topology::Schedule& schedule, int rank, Mode mode,
                              std::vector<int> neighbours, int hop, bool ring_too) {
  const int n = schedule.num_peers();
  const int ring_neighbour = ((rank + hop) % n + n) % n;
  if (mode == Mode::allreduce) {
    if (n == 1) return {};
    return {ring_neighbour};
  }
  if (ring_too && n > 1 &&
      std::find(neighbours.begin(), neighbours.end(), ring_neighbour) == neighbours.end()) {
    neighbours.push_back(ring_neighbour);
  }
  if (mode != Mode::async) return neighbours;
  std::vector<int> all;
  for (int r = 0; r < schedule.num_peers(); ++r)
    if (r != rank) all.push_back(r);
  return all;
}

}  // namespace

std::unique_ptr<transport::ZmqTransport> open_zmq_transport(const topology::Schedule& schedule,
                                                            int rank, const Chunking& chunking,
                                                            const Security& security,
                                                            transport::ZmqOptions options,
                                                            Mode mode, bool ring_too) {
  if (!schedule.has_endpoints()) {
    throw InputError(
        "the topology gives no endpoints: every node needs an endpoint attribute "
        "(e.g. endpoint=\"tcp://127.0.0.1:5600\") to run peers over ZeroMQ");
  }
  SGP_ENFORCE(rank >= 0 && rank < schedule.num_peers(), "rank {} outside the {}-peer topology",
              rank, schedule.num_peers());
  check_keys_flag(schedule, security);
  // asgp: what is still queued for a dead peer at the end must not hold the exit for long.
  if (mode == Mode::async)
    options.linger = std::min(options.linger, std::chrono::milliseconds(1000));
  const auto out =
      ranks_or_all(schedule, rank, mode, schedule.all_out_neighbors(rank), 1, ring_too);
  check_port_numbers(schedule, rank, out);
  if (schedule.has_public_keys()) {
    transport::ZmqCurve curve{own_keys(schedule, rank, security), {}, {}};
    for (int sender :
         ranks_or_all(schedule, rank, mode, schedule.all_in_neighbors(rank), -1, ring_too))
      curve.admitted.emplace(schedule.public_key(sender), sender);
    for (int dest : out) curve.server_keys.emplace(dest, schedule.public_key(dest));
    options.curve = std::move(curve);
  } else {
    std::vector<std::string> endpoints = {schedule.endpoint(rank)};
    for (int dest : out) endpoints.push_back(schedule.endpoint(dest));
    check_plain_endpoints(endpoints, security, fmt::format("rank {}", rank));
    if (security.credentials) {
      options.plain = plain_options(
          *security.credentials, rank,
          ranks_or_all(schedule, rank, mode, schedule.all_in_neighbors(rank), -1, ring_too), out);
    }
  }
  auto t = std::make_unique<transport::ZmqTransport>(
      rank, schedule.endpoint(rank), push_sum_receive_limits(chunking, mode, schedule.num_peers()),
      std::move(options));
  for (int dest : out) t->connect(dest, schedule.endpoint(dest));
  return t;
}

std::optional<transport::CurveServer> monitor_curve(const topology::Schedule& schedule,
                                                    const Security& security,
                                                    const std::string& bind_endpoint) {
  check_keys_flag(schedule, security);
  if (!schedule.has_public_keys()) {
    check_plain_endpoints({bind_endpoint}, security, "monitor");
    return std::nullopt;
  }
  if (schedule.monitor_public_key().empty()) {
    throw InputError(
        "the topology has peer keys but no monitor_public_key graph attribute (`sgp keygen` "
        "writes one): the monitor cannot authenticate itself to the peers");
  }
  transport::CurveServer server{transport::read_curve_keypair(security.keys_dir, "monitor"), {}};
  if (server.own.public_key != schedule.monitor_public_key()) {
    throw InputError(fmt::format(
        "{}/monitor.key does not match the topology's monitor_public_key (keys and topology from "
        "different `sgp keygen` runs?)",
        security.keys_dir));
  }
  for (int r = 0; r < schedule.num_peers(); ++r) server.admitted.emplace(schedule.public_key(r), r);
  return server;
}

std::optional<transport::CurveClient> snapshot_curve(const topology::Schedule& schedule, int rank,
                                                     const Security& security) {
  check_keys_flag(schedule, security);
  if (!schedule.has_public_keys()) return std::nullopt;
  if (schedule.monitor_public_key().empty()) {
    throw InputError(
        "--monitor: the topology has peer keys but no monitor_public_key graph attribute, so "
        "snapshots cannot go to an authenticated monitor (run `sgp keygen` again)");
  }
  return transport::CurveClient{own_keys(schedule, rank, security), schedule.monitor_public_key()};
}

std::optional<transport::PlainClient> snapshot_plain(int rank, const Security& security) {
  if (!security.credentials) return std::nullopt;
  const auto& present = security.credentials->present;
  const auto password = present.find(kMonitorRank);
  if (password == present.end()) return std::nullopt;
  return transport::PlainClient{rank, password->second};
}

}  // namespace sgp::gossip
