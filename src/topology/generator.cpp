#include "sgp/topology/generator.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sgp/endpoint.hpp"
#include "sgp/error.hpp"
#include "sgp/topology/finite_time.hpp"

namespace sgp::topology {

namespace {

struct KindInfo {
  TopologyKind kind;
  std::string_view name;
  std::string_view help;
};

constexpr std::array<KindInfo, 12> kKinds = {{
    {TopologyKind::kRing, "ring", "directed ring: i -> i+1"},
    {TopologyKind::kBidirectionalRing, "bidirectional-ring", "i -> i-1 and i -> i+1"},
    {TopologyKind::kExponential, "exponential", "static: i -> i + 2^j for every j < ceil(log2 N)"},
    {TopologyKind::kOnePeerExponential, "one-peer-exponential",
     "time-varying, period ceil(log2 N): round k, i -> i + 2^(k mod period) (SGP's default)"},
    {TopologyKind::kTorus, "torus",
     "2-D torus R x C (R = largest divisor of N <= sqrt N, N not prime), 4 grid neighbours"},
    {TopologyKind::kHypercube, "hypercube", "N = 2^d: i -> i xor 2^j"},
    {TopologyKind::kComplete, "complete", "i -> every other rank"},
    {TopologyKind::kRandomRegular, "random-regular",
     "random directed graph, out- and in-degree k (--degree, default ceil(log2 N)), seeded"},
    {TopologyKind::kStar, "star", "two-way star around rank 0 (0 -> leaves, leaves -> 0)"},
    {TopologyKind::kHyperHypercube, "hyper-hypercube",
     "time-varying, every prime factor of N <= k+1 (--degree k, default 1): exact average after "
     "one period, <= k neighbours per round"},
    {TopologyKind::kBase, "base",
     "Base-(k+1) graph (--degree k, default 1): exact average after one period for every N, "
     "<= k neighbours per round, period <= 2 log_(k+1) N + 2"},
    {TopologyKind::kOnePeerRandomShift, "one-peer-random-shift",
     "time-varying, 64 seeded rounds: round t, i -> i + a_t, a_t drawn from 1..N-1 (--seed)"},
}};

const KindInfo& info(TopologyKind kind) {
  for (const KindInfo& k : kKinds)
    if (k.kind == kind) return k;
  SGP_ENFORCE(false, "unknown topology kind {}", static_cast<int>(kind));
  return kKinds[0];  // unreachable
}

int ceil_log2(int n) {
  int d = 0;
  while ((1LL << d) < n) ++d;
  return d;
}

using Adjacency = std::vector<std::vector<int>>;  // [rank] -> out-neighbours, in order

// mt19937_64 is fully specified by the standard; the standard distributions are not, so draw
// bounded integers ourselves to make seeded graphs identical on every platform.
std::uint64_t uniform_below(std::mt19937_64& rng, std::uint64_t bound) {
  const std::uint64_t limit = std::mt19937_64::max() - std::mt19937_64::max() % bound;
  std::uint64_t draw;
  do {
    draw = rng();
  } while (draw >= limit);
  return draw % bound;
}

bool strongly_connected(const Adjacency& out) {
  const int n = static_cast<int>(out.size());
  Adjacency in(n);
  for (int i = 0; i < n; ++i)
    for (int j : out[i]) in[j].push_back(i);
  for (const Adjacency* adj : {&out, static_cast<const Adjacency*>(&in)}) {
    std::vector<bool> seen(n, false);
    std::vector<int> stack = {0};
    seen[0] = true;
    int count = 1;
    while (!stack.empty()) {
      const int v = stack.back();
      stack.pop_back();
      for (int w : (*adj)[v])
        if (!seen[w]) {
          seen[w] = true;
          ++count;
          stack.push_back(w);
        }
    }
    if (count != n) return false;
  }
  return true;
}

// k = 1: strongly connected means one cycle through every rank, in a random order. (Swaps split
// a cycle in two, and a random permutation is one cycle with probability 1/N: at N = 4096 a
// thousand tries of swapping failed about 3 times in 4.)
Adjacency random_cycle(int n, std::mt19937_64& rng) {
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  for (int i = n - 1; i > 0; --i)  // Fisher-Yates with our own uniform draw (portable)
    std::swap(order[i], order[uniform_below(rng, static_cast<std::uint64_t>(i) + 1)]);
  Adjacency out(n);
  for (int i = 0; i < n; ++i) out[order[i]] = {order[(i + 1) % n]};
  return out;
}

// Start from the circulant i -> i+1..i+k (k-regular, strongly connected) and randomize it with
// degree-preserving swaps (a->b, c->d) => (a->d, c->b); repeat until strongly connected again.
Adjacency random_regular(int n, int k, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  if (k == 1) return random_cycle(n, rng);
  std::vector<std::pair<int, int>> edges;
  std::set<std::pair<int, int>> present;
  for (int i = 0; i < n; ++i)
    for (int s = 1; s <= k; ++s) {
      edges.emplace_back(i, (i + s) % n);
      present.insert(edges.back());
    }
  const std::uint64_t m = edges.size();
  auto to_adjacency = [&] {
    Adjacency out(n);
    for (auto [a, b] : edges) out[a].push_back(b);
    for (auto& o : out) std::sort(o.begin(), o.end());
    return out;
  };
  for (int attempt = 0; attempt < 1000; ++attempt) {
    for (std::uint64_t swap = 0; swap < 10 * m; ++swap) {
      const std::uint64_t e = uniform_below(rng, m), f = uniform_below(rng, m);
      auto [a, b] = edges[e];
      auto [c, d] = edges[f];
      if (a == c || b == d || a == d || c == b) continue;
      if (present.count({a, d}) || present.count({c, b})) continue;
      present.erase({a, b});
      present.erase({c, d});
      edges[e] = {a, d};
      edges[f] = {c, b};
      present.insert(edges[e]);
      present.insert(edges[f]);
    }
    Adjacency out = to_adjacency();
    if (strongly_connected(out)) return out;
  }
  SGP_ENFORCE(false, "no strongly connected {}-regular graph on {} peers after 1000 tries", k, n);
  return {};
}

// The largest divisor of n not above sqrt(n): the torus's row count (1 when n is prime).
int torus_rows(int n) {
  int rows = 1;
  for (int r = 1; r * r <= n; ++r)
    if (n % r == 0) rows = r;
  return rows;
}

int random_regular_degree(int n, int requested) {
  return requested == 0 ? std::min(ceil_log2(n), n - 1) : requested;
}

Adjacency static_graph(TopologyKind kind, int n, const GeneratorOptions& options) {
  Adjacency out(n);
  auto add = [&](int i, int j) {
    j = ((j % n) + n) % n;
    if (j != i && std::find(out[i].begin(), out[i].end(), j) == out[i].end()) out[i].push_back(j);
  };
  switch (kind) {
    case TopologyKind::kRing:
      for (int i = 0; i < n; ++i) add(i, i + 1);
      break;
    case TopologyKind::kBidirectionalRing:
      for (int i = 0; i < n; ++i) {
        add(i, i - 1);
        add(i, i + 1);
      }
      break;
    case TopologyKind::kExponential:
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < ceil_log2(n); ++j) add(i, i + (1 << j));
      break;
    case TopologyKind::kTorus: {
      const int rows = torus_rows(n), cols = n / rows;
      for (int i = 0; i < n; ++i) {
        const int r = i / cols, c = i % cols;
        add(i, r * cols + (c + 1) % cols);
        add(i, r * cols + (c + cols - 1) % cols);
        add(i, ((r + 1) % rows) * cols + c);
        add(i, ((r + rows - 1) % rows) * cols + c);
      }
      break;
    }
    case TopologyKind::kHypercube:
      for (int i = 0; i < n; ++i)
        for (int j = 0; (1 << j) < n; ++j) add(i, i ^ (1 << j));
      break;
    case TopologyKind::kComplete:  // directly: add()'s duplicate check made this O(N^3)
      for (int i = 0; i < n; ++i) {
        out[i].reserve(static_cast<std::size_t>(n - 1));
        for (int j = 0; j < n; ++j)
          if (j != i) out[i].push_back(j);
      }
      break;
    case TopologyKind::kRandomRegular: {
      return random_regular(n, random_regular_degree(n, options.degree), options.seed);
    }
    case TopologyKind::kStar:
      for (int j = 1; j < n; ++j) {
        add(0, j);
        add(j, 0);
      }
      break;
    case TopologyKind::kOnePeerExponential:
    case TopologyKind::kHyperHypercube:
    case TopologyKind::kBase:
    case TopologyKind::kOnePeerRandomShift:
      SGP_ENFORCE(false, "{} is not static", topology_kind_name(kind));
  }
  return out;
}

// One-peer random shift: kRandomShiftPeriod shifts a_t in 1..n-1 from the seed, drawn again while
// they all share a factor with n (the ranks would split into cosets that never mix).
std::vector<Adjacency> random_shift_phases(int n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int> shifts;
  int common = 0;
  do {
    shifts.clear();
    common = n;
    for (int t = 0; t < kRandomShiftPeriod; ++t) {
      shifts.push_back(1 + static_cast<int>(uniform_below(rng, static_cast<std::uint64_t>(n - 1))));
      common = std::gcd(common, shifts.back());
    }
  } while (common != 1);
  std::vector<Adjacency> phases;
  for (int a : shifts) {
    Adjacency out(n);
    for (int i = 0; i < n; ++i) out[i] = {(i + a) % n};
    phases.push_back(std::move(out));
  }
  return phases;
}

bool is_exact_kind(TopologyKind kind) {
  return kind == TopologyKind::kHyperHypercube || kind == TopologyKind::kBase;
}

// hyper-hypercube and base: --degree k, 0 meaning 1; above n - 1 it changes nothing.
int exact_kind_degree(int n, int requested) {
  return std::min(requested == 0 ? 1 : requested, n - 1);
}

// Uniform weights over out-degree + 1.
Schedule uniform_schedule(int n, const std::vector<Adjacency>& phases) {
  std::vector<std::vector<std::vector<Push>>> edges(phases.size());
  std::vector<std::vector<double>> selves(phases.size());
  for (std::size_t p = 0; p < phases.size(); ++p) {
    edges[p].resize(n);
    selves[p].resize(n);
    for (int i = 0; i < n; ++i) {
      const double w = 1.0 / static_cast<double>(phases[p][i].size() + 1);
      selves[p][i] = w;
      for (int j : phases[p][i]) edges[p][i].push_back({j, w});
    }
  }
  return Schedule(n, std::move(edges), std::move(selves));
}

}  // namespace

const std::vector<TopologyKind>& all_topology_kinds() {
  static const std::vector<TopologyKind> kinds = [] {
    std::vector<TopologyKind> v;
    for (const KindInfo& k : kKinds) v.push_back(k.kind);
    return v;
  }();
  return kinds;
}

std::string_view topology_kind_name(TopologyKind kind) { return info(kind).name; }

TopologyKind parse_topology_kind(std::string_view name) {
  std::string names;
  for (const KindInfo& k : kKinds) {
    if (k.name == name) return k.kind;
    names += names.empty() ? "" : ", ";
    names += k.name;
  }
  throw InputError(fmt::format("unknown topology kind '{}': expected one of {}", name, names));
}

std::string topology_kinds_help() {
  std::string text;
  for (const KindInfo& k : kKinds) text += fmt::format("  {:<22}{}\n", k.name, k.help);
  return text;
}

namespace {

// The first port of the kernel's ephemeral range, where every outgoing connection takes its local
// port: a port picked there can be taken by another process's connection before a peer binds it.
int first_ephemeral_port() {
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  int first = 0;
  if (range >> first && first > 1024) return first;
  return 32768;  // Linux's default
}

// A socket bound to 127.0.0.1:port (0: the OS picks), or -1 when the port is taken.
int bind_loopback(int port, int& bound_port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return -1;
  }
  bound_port = ntohs(addr.sin_port);
  return fd;
}

}  // namespace

std::vector<std::string> free_local_endpoints(int num_peers) {
  constexpr int kLowest = 10000;
  const int highest = first_ephemeral_port() - 1;
  std::mt19937 pick(std::random_device{}());
  std::uniform_int_distribution<int> port_in(kLowest, std::max(kLowest, highest));
  std::vector<int> fds;
  std::vector<std::string> endpoints;
  for (int i = 0; i < num_peers; ++i) {
    int fd = -1, port = 0;
    for (int attempt = 0; attempt < 64 && fd < 0 && highest > kLowest; ++attempt) {
      fd = bind_loopback(port_in(pick), port);
    }
    if (fd < 0) fd = bind_loopback(0, port);  // the OS's pick, as a last resort
    if (fd < 0) {
      for (int open : fds) ::close(open);
      throw IoError("cannot find a free TCP port on 127.0.0.1");
    }
    fds.push_back(fd);
    endpoints.push_back(fmt::format("tcp://127.0.0.1:{}", port));
  }
  for (int fd : fds) ::close(fd);
  return endpoints;
}

std::string_view placement_name(Placement placement) {
  return placement == Placement::block ? "block" : "round-robin";
}

Placement parse_placement(std::string_view name) {
  if (name == "round-robin") return Placement::round_robin;
  if (name == "block") return Placement::block;
  throw InputError(
      fmt::format("--placement: '{}' is not a placement (expected round-robin or block)", name));
}

namespace {

// Which entry of a list of `h` hosts holds rank r of n.
std::size_t host_slot(int r, int n, std::size_t h, Placement placement) {
  const auto rank = static_cast<std::size_t>(r);
  if (placement == Placement::round_robin) return rank % h;
  const std::size_t base = static_cast<std::size_t>(n) / h, extra = static_cast<std::size_t>(n) % h;
  // The first `extra` hosts hold base + 1 ranks each, the others base.
  const std::size_t in_big = extra * (base + 1);
  return rank < in_big ? rank / (base + 1) : extra + (rank - in_big) / base;
}

void check_host(const std::string& h) {
  if (h.empty() || h.find_first_of(" \t:/") != std::string::npos)
    throw InputError(fmt::format("host '{}' is not a host name or IPv4 address", h));
}

// tcp://HOST:PORT with PORT = base_port + the ranks placed on HOST before; base_port 0 gives
// every rank port 0 (sgp launch picks free ports).
std::vector<std::string> addressed(const std::vector<std::string>& host_of_rank, int base_port,
                                   std::size_t num_hosts) {
  std::map<std::string, int> ranks_placed;  // per host, so that a repeated host gets new ports
  std::vector<std::string> endpoints;
  for (const std::string& host : host_of_rank) {
    const int port = base_port == 0 ? 0 : base_port + ranks_placed[host]++;
    if (base_port < 0 || port > 65535)
      throw InputError(fmt::format(
          "ports {}..{} for {} peers on {} host(s) are outside 1..65535 (or 0 for free ports)",
          base_port, port, host_of_rank.size(), num_hosts));
    endpoints.push_back(fmt::format("tcp://{}:{}", host, port));
  }
  return endpoints;
}

}  // namespace

std::vector<std::string> place_endpoints(int num_peers, const std::vector<std::string>& hosts,
                                         int base_port, Placement placement) {
  if (hosts.empty()) throw InputError("no hosts given to place the peers on");
  for (const std::string& h : hosts) check_host(h);
  std::vector<std::string> host_of_rank;
  for (int r = 0; r < num_peers; ++r)
    host_of_rank.push_back(hosts[host_slot(r, num_peers, hosts.size(), placement)]);
  return addressed(host_of_rank, base_port, hosts.size());
}

std::vector<std::string> readdress_ports(const std::vector<std::string>& endpoints, int base_port) {
  std::vector<std::string> host_of_rank;
  for (const std::string& e : endpoints) {
    host_of_rank.push_back(Endpoint::parse(e, "--base-port").host);
    check_host(host_of_rank.back());
  }
  const std::set<std::string> distinct(host_of_rank.begin(), host_of_rank.end());
  return addressed(host_of_rank, base_port, distinct.size());
}

std::vector<std::string> read_hosts_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw InputError(fmt::format("{}: cannot open the hosts file", path.string()));
  std::vector<std::string> hosts;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    line = line.substr(0, line.find('#'));
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    const auto last = line.find_last_not_of(" \t\r");
    std::string host = line.substr(first, last - first + 1);
    if (host.find_first_of(" \t") != std::string::npos)
      throw InputError(
          fmt::format("{}:{}: expected one host per line, got '{}'", path.string(), number, host));
    hosts.push_back(std::move(host));
  }
  if (hosts.empty()) throw InputError(fmt::format("{}: no host in the file", path.string()));
  return hosts;
}

namespace {

void check_exact_kind_fits(TopologyKind kind, const GeneratorOptions& options) {
  if (!is_exact_kind(kind)) return;
  const std::string_view name = topology_kind_name(kind);
  if (options.degree < 0)
    throw InputError(fmt::format("{}: --degree must be at least 1, got {}", name, options.degree));
  if (options.self_weight)
    throw InputError(fmt::format(
        "{}: --self-weight does not apply: its own weights are what makes the average exact",
        name));
  const int n = options.num_peers, k = exact_kind_degree(n, options.degree);
  if (kind == TopologyKind::kHyperHypercube && !hyper_hypercube_factors(n, k))
    throw InputError(fmt::format(
        "hyper-hypercube: every prime factor of the number of peers must be at most k+1 = {} "
        "(--degree k = {}), but {} has a larger one; `base` averages exactly for every N",
        k + 1, k, n));
}

}  // namespace

void check_topology_fits(TopologyKind kind, const GeneratorOptions& options) {
  const int n = options.num_peers;
  if (n < 2)
    throw InputError(
        fmt::format("{}: a topology needs at least 2 peers, got {}", topology_kind_name(kind), n));
  if (options.self_weight &&
      !(*options.self_weight > 0.0 && *options.self_weight < 1.0))  // also rejects NaN
    throw InputError(
        fmt::format("self weight must be strictly between 0 and 1, got {}", *options.self_weight));
  if (kind != TopologyKind::kRandomRegular && !is_exact_kind(kind) && options.degree != 0)
    throw InputError(
        fmt::format("--degree only applies to random-regular, hyper-hypercube and base, not {}",
                    topology_kind_name(kind)));
  check_exact_kind_fits(kind, options);
  if (kind == TopologyKind::kTorus && torus_rows(n) < 2)
    throw InputError(fmt::format(
        "torus: {} peers cannot form an R x C grid with R, C >= 2 (use a composite count)", n));
  if (kind == TopologyKind::kHypercube && (n & (n - 1)) != 0)
    throw InputError(
        fmt::format("hypercube: the number of peers must be a power of two, got {}", n));
  const int k = random_regular_degree(n, options.degree);
  if (kind == TopologyKind::kRandomRegular && (k < 1 || k > n - 1))
    throw InputError(
        fmt::format("random-regular: degree must be in 1..{} for {} peers, got {}", n - 1, n, k));
  place_endpoints(n, options.hosts, options.base_port, options.placement);  // hosts and ports
}

Schedule generate_topology(TopologyKind kind, const GeneratorOptions& options) {
  check_topology_fits(kind, options);
  const int n = options.num_peers;
  if (is_exact_kind(kind)) {
    const int k = exact_kind_degree(n, options.degree);
    Schedule schedule =
        kind == TopologyKind::kBase ? base_schedule(n, k) : hyper_hypercube_schedule(n, k);
    schedule.set_endpoints(place_endpoints(n, options.hosts, options.base_port, options.placement));
    return schedule;
  }
  std::vector<Adjacency> phases;
  if (kind == TopologyKind::kOnePeerRandomShift) {
    phases = random_shift_phases(n, options.seed);
  } else if (kind == TopologyKind::kOnePeerExponential) {
    for (int k = 0; k < ceil_log2(n); ++k) {
      Adjacency out(n);
      for (int i = 0; i < n; ++i) out[i] = {(i + (1 << k)) % n};
      phases.push_back(std::move(out));
    }
  } else {
    phases.push_back(static_graph(kind, n, options));
  }
  Schedule schedule = uniform_schedule(n, phases);
  if (options.self_weight) schedule = schedule.with_self_weight(*options.self_weight);
  schedule.set_endpoints(place_endpoints(n, options.hosts, options.base_port, options.placement));
  return schedule;
}

std::string generator_command_line(TopologyKind kind, const GeneratorOptions& options) {
  std::string line = fmt::format("sgp topology generate {} --peers {}", topology_kind_name(kind),
                                 options.num_peers);
  if (options.self_weight) line += fmt::format(" --self-weight {}", *options.self_weight);
  if ((kind == TopologyKind::kRandomRegular || is_exact_kind(kind)) && options.degree != 0)
    line += fmt::format(" --degree {}", options.degree);
  if (kind == TopologyKind::kRandomRegular || kind == TopologyKind::kOnePeerRandomShift)
    line += fmt::format(" --seed {}", options.seed);
  line +=
      fmt::format(" --host {} --base-port {}", fmt::join(options.hosts, ","), options.base_port);
  if (options.placement != Placement::round_robin)
    line += fmt::format(" --placement {}", placement_name(options.placement));
  return line;
}

}  // namespace sgp::topology
