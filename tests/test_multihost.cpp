// Two real hosts on one machine: network namespaces joined by a veth pair. Four peers of one
// topology, two per host, each host started with its own `sgp launch`, and the consensus monitor
// on the first host, as docs/clusters.md's multi-host recipe says; and sgp consensus with three
// ranks on one host and one on the other (shared memory within a host, TCP across). Needs root
// and `ip` (iproute2); skips visibly otherwise.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "sgp/topology/dot_file.hpp"
#include "sgp/topology/generator.hpp"
#include "support/skip.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"
#include "support/text.hpp"

using sgp::testing::run_command;
using sgp::testing::slurp;

namespace {

// Two namespaces "<tag>a" (10.77.0.1) and "<tag>b" (10.77.0.2), removed on destruction.
class TwoHosts {
 public:
  TwoHosts() : tag_("sgp" + std::to_string(::getpid())) {
    const std::string a = tag_ + "a", b = tag_ + "b";
    ok_ = run_command("ip netns add " + a + " && ip netns add " + b + " && ip link add " + a +
                      "v type veth peer name " + b + "v && ip link set " + a + "v netns " + a +
                      " && ip link set " + b + "v netns " + b + " && ip -n " + a +
                      " addr add 10.77.0.1/24 dev " + a + "v && ip -n " + b +
                      " addr add 10.77.0.2/24 dev " + b + "v && ip -n " + a + " link set " + a +
                      "v up && ip -n " + b + " link set " + b + "v up && ip -n " + a +
                      " link set lo up && ip -n " + b + " link set lo up")
              .exit_code == 0;
  }
  ~TwoHosts() { run_command("ip netns del " + tag_ + "a; ip netns del " + tag_ + "b"); }
  bool ok() const { return ok_; }
  std::string on(char host, const std::string& command) const {
    return "exec ip netns exec " + tag_ + host + " " + command;
  }

 private:
  std::string tag_;
  bool ok_ = false;
};

// Waits for `pid`; after `patience` it is asked to stop (SIGTERM), so a test never hangs.
int wait_exit(pid_t pid, std::chrono::seconds patience = std::chrono::seconds(120)) {
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + patience;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGTERM);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Private hosts: any port is free there; the test picks it.
int random_port() { return 20000 + static_cast<int>(std::random_device{}() % 20000); }

// Four peers, ranks 0 and 2 on 10.77.0.1, 1 and 3 on 10.77.0.2.
std::filesystem::path write_topology(const std::filesystem::path& file, int base_port) {
  sgp::topology::GeneratorOptions options;
  options.num_peers = 4;
  options.hosts = {"10.77.0.1", "10.77.0.2"};
  options.base_port = base_port;
  sgp::topology::write_dot_file(
      sgp::topology::generate_topology(sgp::topology::TopologyKind::kOnePeerExponential, options),
      file);
  return file;
}

bool can_make_hosts() { return ::geteuid() == 0 && run_command("command -v ip").exit_code == 0; }

}  // namespace

TEST_CASE("four peers on two hosts (network namespaces) train together over TCP") {
  SGP_SKIP_WITHOUT_FASHION_MNIST();
  if (!can_make_hosts()) SGP_SKIP("needs root and iproute2 to create network namespaces");
  TwoHosts hosts;
  if (!hosts.ok()) {
    SGP_SKIP("this kernel refused to create network namespaces");
  }
  sgp::testing::TempDir dir;
  const int base_port = random_port();
  const auto topology = write_topology(dir / "t.dot", base_port);

  const std::string sgp = sgp::testing::sgp_binary().string();
  const std::string monitor_endpoint = "tcp://10.77.0.1:" + std::to_string(base_port - 1);
  const std::string common = " --device cpu --topology " + topology.string() +
                             " --max-iterations 60 --eval-every 0.1 --timeout-ms 20000"
                             " --insecure --monitor " +
                             monitor_endpoint;
  const pid_t monitor = sgp::testing::start_command(
      hosts.on('a', sgp + " monitor --topology " + topology.string() + " --insecure --bind " +
                        monitor_endpoint + " --run-dir " + (dir / "m").string() +
                        " --until-iteration 60"),
      dir / "m.log");
  const pid_t a = sgp::testing::start_command(
      hosts.on('a', sgp + " launch --run-dir " + (dir / "a").string() + common), dir / "a.log");
  const pid_t b = sgp::testing::start_command(
      hosts.on('b', sgp + " launch --run-dir " + (dir / "b").string() + common), dir / "b.log");
  const int a_exit = wait_exit(a), b_exit = wait_exit(b);
  INFO(slurp(dir / "a.log") << slurp(dir / "b.log"));
  CHECK(a_exit == 0);
  CHECK(b_exit == 0);
  // Each host started the ranks whose endpoint is its own address (round robin: 0,2 and 1,3).
  CHECK(std::filesystem::exists(dir / "a" / "peer-0-summary.json"));
  CHECK(std::filesystem::exists(dir / "a" / "peer-2-summary.json"));
  CHECK(std::filesystem::exists(dir / "b" / "peer-1-summary.json"));
  CHECK(std::filesystem::exists(dir / "b" / "peer-3-summary.json"));
  double mass = 0.0;
  for (const auto& [host, rank] : {std::pair{"a", 0}, {"a", 2}, {"b", 1}, {"b", 3}}) {
    const auto s = nlohmann::json::parse(
        std::ifstream(dir / host / ("peer-" + std::to_string(rank) + "-summary.json")));
    mass += s["weight"].get<double>();
  }
  CHECK(mass == doctest::Approx(4.0).epsilon(1e-12));

  // The monitor on host a heard from the peers of both hosts.
  const auto monitor_exit = wait_exit(monitor, std::chrono::seconds(15));
  INFO(slurp(dir / "m.log"));
  CHECK(monitor_exit == 0);
  const auto summary = nlohmann::json::parse(std::ifstream(dir / "m" / "monitor-summary.json"));
  CHECK(summary["final_iteration"] == 60);
  CHECK(summary["final_consensus_error"].get<double>() < 1e-2);
}

// docs/clusters.md's recipe on a shared filesystem: one run directory for every host. The settings
// are written once (--prepare-only), the monitor and each host's launcher read them; every one of
// them writes only its own files, and the last to finish merges summary.json with every peer.
TEST_CASE("two hosts' launchers and a monitor sharing one run directory write one summary") {
  SGP_SKIP_WITHOUT_FASHION_MNIST();
  if (!can_make_hosts()) SGP_SKIP("needs root and iproute2 to create network namespaces");
  TwoHosts hosts;
  if (!hosts.ok()) SGP_SKIP("this kernel refused to create network namespaces");
  sgp::testing::TempDir dir;
  const int base_port = random_port();
  const auto topology = write_topology(dir / "t.dot", base_port);
  const std::string sgp = sgp::testing::sgp_binary().string();
  const std::string monitor_endpoint = "tcp://10.77.0.1:" + std::to_string(base_port - 1);
  const auto run = dir / "run";
  const auto config = (run / "config.json").string();
  const auto prepared =
      run_command(sgp + " launch --prepare-only --run-dir " + run.string() +
                  " --device cpu --topology " + topology.string() +
                  " --max-iterations 40 --eval-every 0.1 --timeout-ms 20000 --insecure --monitor " +
                  monitor_endpoint);
  REQUIRE_MESSAGE(prepared.exit_code == 0, prepared.output);
  const pid_t monitor = sgp::testing::start_command(
      hosts.on('a', sgp + " monitor --config " + config + " --bind " + monitor_endpoint),
      dir / "m.log");
  // --base-port moves the ranks to other ports of their hosts (both launchers write the same
  // topology-readdressed.dot, and the peers bind there).
  const std::string moved = " --base-port " + std::to_string(base_port + 100);
  const pid_t a = sgp::testing::start_command(
      hosts.on('a', sgp + " launch --config " + config + moved), dir / "a.log");
  const pid_t b = sgp::testing::start_command(
      hosts.on('b', sgp + " launch --config " + config + moved), dir / "b.log");
  const int a_exit = wait_exit(a), b_exit = wait_exit(b);
  const int monitor_exit = wait_exit(monitor, std::chrono::seconds(30));
  INFO(slurp(dir / "a.log") << slurp(dir / "b.log") << slurp(dir / "m.log"));
  CHECK(a_exit == 0);
  CHECK(b_exit == 0);
  CHECK(monitor_exit == 0);
  const auto summary = nlohmann::json::parse(std::ifstream(run / "summary.json"));
  CHECK(summary["peers"] == 4);
  CHECK_FALSE(summary.contains("missing_peers"));
  CHECK(summary["sum_of_weights"].get<double>() == doctest::Approx(4.0).epsilon(1e-12));
  CHECK(summary["iterations"] == 40);
  CHECK(summary.contains("final_average_model_accuracy"));
  const auto used = sgp::topology::read_dot_file(run / "topology-readdressed.dot");
  CHECK(used.endpoint(3) == "tcp://10.77.0.2:" + std::to_string(base_port + 101));
  CHECK(sgp::testing::contains(slurp(run / "peer-3.log"), "bound " + used.endpoint(3)));
}

namespace {

// The last record (the state after finish()) of rank `rank`'s consensus log in `run`.
nlohmann::json final_record(const std::filesystem::path& run, int rank) {
  std::ifstream in(run / ("peer-" + std::to_string(rank) + ".jsonl"));
  std::string line, last;
  while (std::getline(in, line)) last = line;
  REQUIRE_MESSAGE(!last.empty(), "rank " << rank << " recorded nothing");
  return nlohmann::json::parse(last);
}

}  // namespace

// Mixed hosts (docs/transport.md): ranks 0, 1 and 2 on host a, rank 3 alone on host b. An edge
// between two ranks of host a goes through a shared-memory ring; every edge of rank 3 over TCP.
// One-peer exponential on 4 peers pushes i -> i + 1 in even rounds and i -> i + 2 in odd ones:
// of host a's edges, 0 -> 1, 1 -> 2, 0 -> 2 and 2 -> 0 are local, so in 12 rounds rank 0 sends
// all 12 payloads through its rings, ranks 1 and 2 six each, rank 3 none.
TEST_CASE("sgp consensus on two hosts: shared memory within a host, TCP across, exact mean") {
  if (!can_make_hosts()) SGP_SKIP("needs root and iproute2 to create network namespaces");
  TwoHosts hosts;
  if (!hosts.ok()) SGP_SKIP("this kernel refused to create network namespaces");
  sgp::testing::TempDir dir;
  sgp::topology::GeneratorOptions options;
  options.num_peers = 4;
  auto schedule =
      sgp::topology::generate_topology(sgp::topology::TopologyKind::kOnePeerExponential, options);
  schedule.set_endpoints({"tcp://10.77.0.1:47500", "tcp://10.77.0.1:47501", "tcp://10.77.0.1:47502",
                          "tcp://10.77.0.2:47503"});
  const auto topology = dir / "t.dot";
  sgp::topology::write_dot_file(schedule, topology);
  constexpr int rounds = 12, dim = 50000;
  const auto run = dir / "run";
  std::vector<pid_t> peers;
  for (int rank = 0; rank < 4; ++rank) {
    peers.push_back(sgp::testing::start_command(
        hosts.on(rank < 3 ? 'a' : 'b',
                 sgp::testing::sgp_binary().string() + " consensus --insecure --rank " +
                     std::to_string(rank) + " --topology " + topology.string() + " --rounds " +
                     std::to_string(rounds) + " --dim " + std::to_string(dim) +
                     " --timeout-ms 20000 --run-dir " + run.string()),
        dir / ("peer-" + std::to_string(rank) + ".log")));
  }
  std::vector<int> exits;
  for (pid_t pid : peers) exits.push_back(wait_exit(pid));
  constexpr std::uint64_t payload = dim * sizeof(float);
  const std::uint64_t shm_payloads[] = {12, 6, 6, 0};
  double consensus_error = 0;
  for (int rank = 0; rank < 4; ++rank) {
    CAPTURE(rank);
    const std::string log = slurp(dir / ("peer-" + std::to_string(rank) + ".log"));
    INFO(log);
    REQUIRE(exits[rank] == 0);
    CHECK(sgp::testing::contains(
        log, rank == 3 ? "local fast path: no peer of this host" : "local fast path to ranks "));
    const auto final = final_record(run, rank);
    const double distance = final["distance_to_mean"].get<double>();
    consensus_error += distance * distance / 4;
    CHECK(final["rejected"] == 0);
    CHECK(final["shm_refused"] == 0);
    CHECK(final["shm_inline_messages"] == 0);
    CHECK(final["shm_bytes"] == shm_payloads[rank] * payload);
    // Over ZeroMQ: the other payloads with their 80-byte headers (TCP), and for each ring
    // payload its 128-byte descriptor and header (rank 0 sent nothing else).
    CHECK(final["zmq_bytes"] ==
          (rounds - shm_payloads[rank]) * (payload + 80) + shm_payloads[rank] * (128 + 80));
  }
  CHECK(consensus_error <= 1e-12);  // as sgp consensus --local's summary computes it
}
