#pragma once
// PLAIN authentication (ZeroMQ RFC 24) with per-run passwords: what a keyless run whose every
// process is on this host uses instead of CURVE (sgp launch, sgp consensus --local; --insecure
// turns it off). A client presents a user name (its rank) and a password; the server's ZAP
// handler admits it only when that rank's password matches, and tags its messages with the rank
// (Message::authenticated_rank), as with CURVE. Unlike CURVE nothing is encrypted, and the
// server does not prove who it is: fit only where the traffic cannot be read by others (loopback
// and Unix sockets of one host), and with a password per (sender, receiver) pair, so that a
// process that takes over a dead peer's port learns only passwords for that port.
#include <map>
#include <string>

namespace sgp::transport {

// A PLAIN server (a PULL that binds): sender rank -> the password it must present.
struct PlainServer {
  std::map<int, std::string> admitted;
};

// A PLAIN client (a PUSH): its rank (the user name) and the password for that server.
struct PlainClient {
  int rank = 0;
  std::string password;
};

}  // namespace sgp::transport
