#pragma once
// Topology files for multi-process tests: a generated topology whose endpoints are free TCP ports
// on 127.0.0.1 (never fixed ports), or port 0 for `sgp launch` to pick.

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "sgp/topology/dot_file.hpp"
#include "sgp/topology/generator.hpp"

namespace sgp::testing {

// Writes topology `kind` for `n` peers to `path` with these endpoints.
inline std::filesystem::path write_topology_at(const std::filesystem::path& path,
                                               const std::string& kind, int n,
                                               std::vector<std::string> endpoints) {
  topology::GeneratorOptions options;
  options.num_peers = n;
  auto schedule = topology::generate_topology(topology::parse_topology_kind(kind), options);
  schedule.set_endpoints(std::move(endpoints));
  topology::write_dot_file(schedule, path);
  return path;
}

// ... with free local ports; `last_endpoint`, when given, replaces the last rank's endpoint (e.g.
// one that cannot be bound).
inline std::filesystem::path write_local_topology(const std::filesystem::path& path,
                                                  const std::string& kind, int n,
                                                  const std::string& last_endpoint = "") {
  auto endpoints = topology::free_local_endpoints(n);
  if (!last_endpoint.empty()) endpoints.back() = last_endpoint;
  return write_topology_at(path, kind, n, std::move(endpoints));
}

// The same with every endpoint tcp://127.0.0.1:0, for tests that start the peers with `sgp
// launch`: it picks each rank's port and holds it until the peer listens, so that no other test
// can take it first (a port picked free above can be taken between the pick and the peer's bind).
inline std::filesystem::path write_launch_topology(const std::filesystem::path& path,
                                                   const std::string& kind, int n) {
  return write_topology_at(path, kind, n, std::vector<std::string>(n, "tcp://127.0.0.1:0"));
}

}  // namespace sgp::testing
