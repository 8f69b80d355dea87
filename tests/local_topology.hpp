#pragma once
// Topology files for multi-process tests: a generated topology whose endpoints are free TCP ports
// on 127.0.0.1 chosen by the OS (never fixed ports).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "sgp/topology/dot_file.hpp"
#include "sgp/topology/generator.hpp"

namespace sgp::testing {

// `n` distinct free TCP ports on 127.0.0.1 (all held open until all are known).
inline std::vector<int> free_ports(int n) {
  std::vector<int> fds, ports;
  for (int i = 0; i < n; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    socklen_t len = sizeof addr;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    ports.push_back(ntohs(addr.sin_port));
    fds.push_back(fd);
  }
  for (int fd : fds) ::close(fd);
  return ports;
}

// Writes topology `kind` for `n` peers to `path` with free local ports; `last_endpoint`, when
// given, replaces the last rank's endpoint (e.g. one that cannot be bound).
inline std::filesystem::path write_local_topology(const std::filesystem::path& path,
                                                  const std::string& kind, int n,
                                                  const std::string& last_endpoint = "") {
  topology::GeneratorOptions options;
  options.num_peers = n;
  auto schedule = topology::generate_topology(topology::parse_topology_kind(kind), options);
  std::vector<std::string> endpoints;
  for (int port : free_ports(n)) endpoints.push_back("tcp://127.0.0.1:" + std::to_string(port));
  if (!last_endpoint.empty()) endpoints.back() = last_endpoint;
  schedule.set_endpoints(endpoints);
  topology::write_dot_file(schedule, path);
  return path;
}

}  // namespace sgp::testing
