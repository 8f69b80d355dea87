#pragma once
// Emulated hosts on this machine, for studying gossip over limited links (`sgp launch
// --link-rate`, `sgp emulate up|down`): N network namespaces PREFIX-0 .. PREFIX-<N-1>, each with
// one interface (eth0, address 10.A.B.<i+1>/24) whose veth peer is plugged into the bridge
// PREFIX-br in this (the root) namespace, which has 10.A.B.254 so that processes here (the
// consensus monitor) reach every host. Each host's egress goes through a tc tbf qdisc at the
// given rate (this kernel has no netem: no latency). Needs root and iproute2 (ip, tc).
#include <filesystem>
#include <string>
#include <vector>

#include "sgp/config/link_rate.hpp"

namespace sgp::launch {

class EmulatedHosts {
 public:
  // Creates the hosts. InputError when not root, without ip/tc, or for a bad prefix (1-10
  // characters a-z0-9) or count (1..64); IoError naming the command when one fails, after
  // removing whatever was created.
  EmulatedHosts(std::string prefix, int count, const config::LinkRate& rate);
  // Removes the hosts unless release() was called.
  ~EmulatedHosts();
  EmulatedHosts(const EmulatedHosts&) = delete;
  EmulatedHosts& operator=(const EmulatedHosts&) = delete;

  // Keeps the hosts after this object is gone (`sgp emulate up`); remove_emulated_hosts() ends
  // them.
  void release() { owned_ = false; }

  int count() const { return count_; }
  std::string namespace_name(int host) const;  // PREFIX-<host>
  std::string address(int host) const;         // 10.A.B.<host + 1>
  std::string bridge_address() const;          // 10.A.B.254, in this namespace

 private:
  void create(const config::LinkRate& rate);

  std::string prefix_;
  int count_;
  std::string subnet_;  // "10.A.B"
  bool owned_ = true;
};

// Throws InputError unless this process can create namespaces (root) and finds ip and tc.
void require_emulation_tools();

// Deletes the namespaces PREFIX-<number> and the bridge PREFIX-br (what `sgp emulate up` left);
// returns how many namespaces went. Nothing there is not an error.
int remove_emulated_hosts(const std::string& prefix);

// `sgp emulate up`: one emulated host per rank of the topology file `topology`, left running,
// and `out`: that topology readdressed onto them (rank r at tcp://<host r>:29500). Returns the
// hosts' description (names, addresses, the bridge's address for a monitor).
std::string emulate_up(const std::string& prefix, const std::filesystem::path& topology,
                       const config::LinkRate& rate, const std::filesystem::path& out);

// The path of ip(8), for running a command inside a host: ip netns exec NAME ...
std::string ip_program();

}  // namespace sgp::launch
