#pragma once
// Topology files for multi-process tests: a generated topology whose endpoints are free TCP ports
// on 127.0.0.1 chosen by the OS (never fixed ports).

#include <filesystem>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "sgp/topology/dot_file.hpp"
#include "sgp/topology/generator.hpp"

namespace sgp::testing {

// Writes topology `kind` for `n` peers to `path` with free local ports; `last_endpoint`, when
// given, replaces the last rank's endpoint (e.g. one that cannot be bound).
inline std::filesystem::path write_local_topology(const std::filesystem::path& path,
                                                  const std::string& kind, int n,
                                                  const std::string& last_endpoint = "") {
  topology::GeneratorOptions options;
  options.num_peers = n;
  auto schedule = topology::generate_topology(topology::parse_topology_kind(kind), options);
  auto endpoints = topology::free_local_endpoints(n);
  if (!last_endpoint.empty()) endpoints.back() = last_endpoint;
  schedule.set_endpoints(endpoints);
  topology::write_dot_file(schedule, path);
  return path;
}

}  // namespace sgp::testing
