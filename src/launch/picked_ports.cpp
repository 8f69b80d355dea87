#include "sgp/launch/picked_ports.hpp"

#include <unistd.h>

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "sgp/endpoint.hpp"
#include "sgp/error.hpp"
#include "sgp/transport/handed_listener.hpp"

namespace sgp::launch {
namespace {

std::string with_port(const Endpoint& e, int port) {
  const std::string host = e.host.find(':') != std::string::npos ? "[" + e.host + "]" : e.host;
  return fmt::format("tcp://{}{}{}:{}", e.source, e.source.empty() ? "" : ";", host, port);
}

}  // namespace

void PickedPorts::pick(topology::Schedule& schedule, const std::vector<int>& local) {
  std::vector<std::string> endpoints = schedule.endpoints();
  for (int r = 0; r < schedule.num_peers(); ++r) {
    const auto e = Endpoint::parse(endpoints[r], fmt::format("rank {}'s endpoint", r));
    if (!e.leaves_port_open()) continue;
    if (std::ranges::find(local, r) == local.end()) {
      release();
      throw InputError(fmt::format(
          "rank {}'s endpoint {} has no port number, and rank {} is not started here "
          "(--ranks, --prepare-only): only the `sgp launch` that starts a rank can pick its "
          "port; give the port, or start every rank with port 0 in one launch",
          r, e.text(), r));
    }
    try {
      const auto listener = transport::listen_on_free_port(e.host, fmt::format("rank {}", r));
      held_.emplace(r, listener.fd);
      endpoints[r] = with_port(e, listener.port);
    } catch (...) {
      release();
      throw;
    }
  }
  if (any()) schedule.set_endpoints(std::move(endpoints));
}

PickedPorts::~PickedPorts() { release(); }

void PickedPorts::hand_to(ChildSpec& child) const {
  const auto it = held_.find(child.rank);
  if (it == held_.end()) return;
  child.inherited_fd = it->second;
  child.env.push_back(fmt::format("{}={}", transport::kHandedListenerVariable, it->second));
}

void PickedPorts::release() {
  for (const auto& [rank, fd] : held_) ::close(fd);
  held_.clear();
}

}  // namespace sgp::launch
