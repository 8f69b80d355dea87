#pragma once
// A listening TCP socket handed from `sgp launch` to a peer it starts, so that no other process
// can take the peer's port between the pick and the bind. A topology endpoint with port 0 on the
// launcher's host asks for it: the launcher listens at HOST with a port the OS picks, writes that
// port into the run's topology, and starts the peer with the socket open under the descriptor
// number in $SGP_LISTEN_FD; the peer's ZeroMQ socket takes it over (ZMQ_USE_FD) instead of
// binding. Without it a port picked free can be taken by another process before the peer binds
// (another run's, a test's), and that peer cannot start.
#include <optional>
#include <string>

namespace sgp::transport {

inline constexpr const char* kHandedListenerVariable = "SGP_LISTEN_FD";

// An open socket listening on a port the OS picked; its owner closes fd.
struct Listener {
  int fd = -1;
  int port = 0;
};

// Listens at `host` (an IPv4 address or a name that resolves to one), FD_CLOEXEC set: a child
// that is to inherit it clears that flag after fork. Throws IoError naming `who` when it cannot.
Listener listen_on_free_port(const std::string& host, const std::string& who);

// The socket this process was handed for `endpoint` (tcp://HOST:PORT), once per process (a
// second transport binds as usual): nothing when $SGP_LISTEN_FD is unset or names no socket
// listening at PORT (a variable inherited from elsewhere). The socket is then FD_CLOEXEC, so that
// this process's own children do not hold the port.
std::optional<int> take_handed_listener(const std::string& endpoint);

}  // namespace sgp::transport
