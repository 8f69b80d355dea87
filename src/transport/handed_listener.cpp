#include "sgp/transport/handed_listener.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

#include "sgp/endpoint.hpp"
#include "sgp/error.hpp"

namespace sgp::transport {
namespace {

constexpr int kBacklog = 100;  // ZeroMQ's default ZMQ_BACKLOG, which its own bind would use

// The IPv4 address `host` names, or IoError.
sockaddr_in ipv4_address(const std::string& host, const std::string& who) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0 || !found) {
    throw IoError(fmt::format("{}: cannot listen at '{}': {}", who, host,
                              rc != 0 ? ::gai_strerror(rc) : "no IPv4 address"));
  }
  sockaddr_in address{};
  std::memcpy(&address, found->ai_addr, sizeof address);
  ::freeaddrinfo(found);
  return address;
}

// The port a socket is bound to, or 0.
int bound_port(int fd) {
  sockaddr_in address{};
  socklen_t length = sizeof address;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0 ||
      address.sin_family != AF_INET)
    return 0;
  return ntohs(address.sin_port);
}

bool is_listening(int fd) {
  int listening = 0;
  socklen_t length = sizeof listening;
  return ::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &length) == 0 && listening == 1;
}

}  // namespace

Listener listen_on_free_port(const std::string& host, const std::string& who) {
  sockaddr_in address = ipv4_address(host, who);
  address.sin_port = 0;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw IoError(fmt::format("{}: cannot open a socket: {}", who, std::strerror(errno)));
  const int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);  // as ZeroMQ's own bind does
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(fd, kBacklog) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    throw IoError(fmt::format("{}: cannot listen at {}: {}", who, host, why));
  }
  return {fd, bound_port(fd)};
}

std::optional<int> take_handed_listener(const std::string& endpoint) {
  static std::atomic<bool> taken{false};
  const char* text = std::getenv(kHandedListenerVariable);
  const auto e = Endpoint::parse(endpoint);
  if (!text || !e || !e->has_port_number()) return std::nullopt;
  const std::string_view digits(text);
  int fd = -1;
  if (std::from_chars(digits.data(), digits.data() + digits.size(), fd).ec != std::errc{} || fd < 0)
    return std::nullopt;
  if (!is_listening(fd) || std::to_string(bound_port(fd)) != e->port) return std::nullopt;
  if (taken.exchange(true)) return std::nullopt;
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  return fd;
}

}  // namespace sgp::transport
