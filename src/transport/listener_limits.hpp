#pragma once
// What every listening ZeroMQ socket of sgp limits (the peers' receive sockets, the monitor's).
#include <chrono>
#include <zmq.hpp>

namespace sgp::transport {

// A connection that has not completed ZeroMQ's greeting and security handshake this long after
// it was accepted is closed. An idle connection holds a descriptor: without this limit (ZeroMQ's
// default is 30 s) a flood of idle connections exhausts a process's descriptors and its results
// cannot be written. A real peer's handshake takes milliseconds, a few round trips.
inline constexpr std::chrono::milliseconds kHandshakeTimeout{5000};

inline void limit_listener(zmq::socket_t& socket) {
  socket.set(zmq::sockopt::handshake_ivl, static_cast<int>(kHandshakeTimeout.count()));
}

}  // namespace sgp::transport
