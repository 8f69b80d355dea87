#include "sgp/launch/emulated_hosts.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "sgp/error.hpp"
#include "sgp/topology/dot_file.hpp"
#include "sgp/topology/schedule.hpp"

namespace sgp::launch {

namespace {

constexpr int kMaxHosts = 64;

std::string find_program(const std::string& name) {
  for (const char* dir : {"/usr/sbin", "/sbin", "/usr/bin", "/bin"}) {
    const auto path = std::filesystem::path(dir) / name;
    if (::access(path.c_str(), X_OK) == 0) return path.string();
  }
  return {};
}

struct CommandResult {
  int status = -1;
  std::string output;
};

// Runs a command line of our own making (names and numbers only, never user text) through sh.
CommandResult run(const std::string& command) {
  CommandResult result;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen((command + " 2>&1").c_str(), "r"), ::pclose);
  if (!pipe) return result;
  std::array<char, 512> buffer{};
  while (std::fgets(buffer.data(), buffer.size(), pipe.get())) result.output += buffer.data();
  result.status = ::pclose(pipe.release());
  return result;
}

void run_checked(const std::string& command) {
  const auto r = run(command);
  if (r.status != 0) {
    throw IoError(fmt::format("link emulation: '{}' failed: {}", command,
                              r.output.empty() ? "(no output)" : r.output));
  }
}

// A /24 that no interface here uses yet, chosen from the prefix so that two emulations started
// together (different prefixes) rarely try the same one.
std::string free_subnet(const std::string& prefix) {
  const std::string used = run("ip -o -4 addr show").output;
  const std::size_t seed = std::hash<std::string>{}(prefix);
  for (std::size_t k = 0; k < 4096; ++k) {
    const std::size_t h = seed + k;
    const auto subnet = fmt::format("10.{}.{}", 200 + h % 50, h / 50 % 256);
    if (used.find(" " + subnet + ".") == std::string::npos) return subnet;
  }
  throw IoError("link emulation: no free 10.x.y.0/24 subnet for the emulated hosts");
}

// tc's tbf: a bucket of 1 ms at the rate (at least 16 KiB, which holds a few full frames) and a
// queue of 100 ms on top; a sender that overfills it sees drops, as on a real link.
std::string tbf_arguments(const config::LinkRate& rate) {
  const double bytes_per_second = rate.bits_per_second / 8.0;
  const auto burst = static_cast<long long>(std::max(16384.0, bytes_per_second * 1e-3));
  const auto limit = static_cast<long long>(burst + bytes_per_second * 0.1);
  return fmt::format("tbf rate {} burst {} limit {}", rate.tc_rate(), burst, limit);
}

void check_prefix(const std::string& prefix) {
  if (prefix.empty() || prefix.size() > 10 ||
      prefix.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789") != std::string::npos) {
    throw InputError(fmt::format(
        "emulated hosts: prefix '{}' must be 1 to 10 characters a-z and 0-9 (it names network "
        "namespaces and interfaces, at most 15 characters)",
        prefix));
  }
}

}  // namespace

std::string ip_program() { return find_program("ip"); }

void require_emulation_tools() {
  if (::geteuid() != 0) {
    throw InputError(
        "link emulation needs root (it creates network namespaces and tc qdiscs); run as root "
        "or leave --link-rate out");
  }
  for (const char* tool : {"ip", "tc"}) {
    if (find_program(tool).empty()) {
      throw InputError(fmt::format(
          "link emulation needs '{}' (Debian package iproute2), not found in /usr/sbin, /sbin, "
          "/usr/bin or /bin",
          tool));
    }
  }
}

EmulatedHosts::EmulatedHosts(std::string prefix, int count, const config::LinkRate& rate)
    : prefix_(std::move(prefix)), count_(count) {
  check_prefix(prefix_);
  if (count < 1 || count > kMaxHosts) {
    throw InputError(fmt::format("emulated hosts: {} hosts asked for, between 1 and {} possible",
                                 count, kMaxHosts));
  }
  require_emulation_tools();
  subnet_ = free_subnet(prefix_);
  try {
    create(rate);
  } catch (...) {
    remove_emulated_hosts(prefix_);
    throw;
  }
}

EmulatedHosts::~EmulatedHosts() {
  if (owned_) remove_emulated_hosts(prefix_);
}

std::string EmulatedHosts::namespace_name(int host) const {
  return fmt::format("{}-{}", prefix_, host);
}
std::string EmulatedHosts::address(int host) const {
  return fmt::format("{}.{}", subnet_, host + 1);
}
std::string EmulatedHosts::bridge_address() const { return subnet_ + ".254"; }

void EmulatedHosts::create(const config::LinkRate& rate) {
  const std::string bridge = prefix_ + "-br";
  run_checked(fmt::format("ip link add {} type bridge", bridge));
  run_checked(fmt::format("ip addr add {}/24 dev {}", bridge_address(), bridge));
  run_checked(fmt::format("ip link set {} up", bridge));
  for (int i = 0; i < count_; ++i) {
    const std::string ns = namespace_name(i), outside = fmt::format("{}-v{}", prefix_, i),
                      inside = fmt::format("{}-h{}", prefix_, i);
    run_checked(fmt::format("ip netns add {}", ns));
    run_checked(fmt::format("ip link add {} type veth peer name {}", outside, inside));
    run_checked(fmt::format("ip link set {} netns {}", inside, ns));
    run_checked(fmt::format("ip -n {} link set {} name eth0", ns, inside));
    run_checked(fmt::format("ip -n {} addr add {}/24 dev eth0", ns, address(i)));
    run_checked(fmt::format("ip -n {} link set eth0 up", ns));
    run_checked(fmt::format("ip -n {} link set lo up", ns));
    run_checked(fmt::format("ip link set {} master {} up", outside, bridge));
    if (rate.bits_per_second > 0) {
      run_checked(fmt::format("tc -n {} qdisc replace dev eth0 root {}", ns, tbf_arguments(rate)));
    }
  }
  spdlog::info("emulated {} hosts {}-0..{} at {}.1..{} (bridge {} at {}), egress {}", count_,
               prefix_, count_ - 1, subnet_, count_, bridge, bridge_address(),
               rate.bits_per_second > 0 ? tbf_arguments(rate) : "unlimited");
}

int remove_emulated_hosts(const std::string& prefix) {
  check_prefix(prefix);
  int removed = 0;
  std::istringstream list(run("ip netns list").output);
  for (std::string line; std::getline(list, line);) {
    const std::string name = line.substr(0, line.find(' '));
    if (!name.starts_with(prefix + "-")) continue;
    const auto number = name.substr(prefix.size() + 1);
    if (number.empty() || number.find_first_not_of("0123456789") != std::string::npos) continue;
    if (run(fmt::format("ip netns del {}", name)).status == 0) ++removed;
  }
  run(fmt::format("ip link del {}-br 2>/dev/null", prefix));  // absent: nothing to do
  return removed;
}

std::string emulate_up(const std::string& prefix, const std::filesystem::path& topology,
                       const config::LinkRate& rate, const std::filesystem::path& out) {
  topology::DotReadOptions options;
  options.require_endpoints = false;
  topology::Schedule schedule = topology::read_dot_file(topology, options);
  const int n = schedule.num_peers();
  EmulatedHosts hosts(prefix, n, rate);
  std::vector<std::string> endpoints;
  std::string description;
  for (int r = 0; r < n; ++r) {
    endpoints.push_back(fmt::format("tcp://{}:29500", hosts.address(r)));
    description += fmt::format("rank {}: namespace {}, address {}\n", r, hosts.namespace_name(r),
                               hosts.address(r));
  }
  schedule.set_endpoints(std::move(endpoints));
  topology::write_dot_file(schedule, out,
                           fmt::format("{} on the emulated hosts {}-*", topology.string(), prefix));
  hosts.release();
  return description +
         fmt::format("bridge {}-br: {} (bind a monitor there)\n", prefix, hosts.bridge_address());
}

}  // namespace sgp::launch
