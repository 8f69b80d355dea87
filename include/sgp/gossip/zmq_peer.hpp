#pragma once
// Wiring one peer's ZeroMQ transport from the topology: bind at the peer's own endpoint, connect
// to every rank it may ever push to (the union of its out-neighbours over the period).
#include <cstddef>
#include <memory>

#include "sgp/gossip/push_sum_config.hpp"
#include "sgp/topology/schedule.hpp"
#include "sgp/transport/zmq_transport.hpp"

namespace sgp::gossip {

// Throws InputError when the schedule has no endpoints, IoError when binding fails.
// `vector_size`, when given, caps every received frame at what that many parameters take in
// `mode` (ZMQ_MAXMSGSIZE). Async mode connects to every rank (membership notices go to all,
// and a repaired schedule may push anywhere) and sends running totals in float64.
std::unique_ptr<transport::ZmqTransport> open_zmq_transport(const topology::Schedule& schedule,
                                                            int rank,
                                                            transport::ZmqOptions options = {},
                                                            std::size_t vector_size = 0,
                                                            Mode mode = Mode::sync);

}  // namespace sgp::gossip
