// Link emulation: `sgp launch --link-rate` runs every peer on its own emulated host (a network
// namespace with a tc tbf egress limit) and `sgp emulate up|down` makes such hosts by hand.
// Needs root and iproute2; skips visibly otherwise.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "support/skip.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"
#include "support/text.hpp"

using sgp::testing::run_command;
using sgp::testing::run_sgp;
using sgp::testing::slurp;

namespace {

// A topology file of the repository.
std::string topology_file(const std::string& name) {
  return sgp::testing::source_path("topologies/" + name);
}

bool can_emulate() {
  return ::geteuid() == 0 && run_command("command -v ip && command -v tc").exit_code == 0;
}

// How many network namespaces here have a name starting with `prefix`.
int namespaces_named(const std::string& prefix) {
  return std::stoi(run_command("ip netns list | grep -c '^" + prefix + "' || true").output);
}

}  // namespace

TEST_CASE("--link-rate refuses a rate it cannot read, naming the flag") {
  const auto r = run_sgp("launch --topology " + topology_file("one-peer-exponential-4.dot") +
                         " --link-rate 5furlongs");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("--link-rate") != std::string::npos);
  CHECK(r.output.find("'5furlongs'") != std::string::npos);
}

TEST_CASE(
    "sgp launch --link-rate: the peers' links carry no more than the rate, the run completes") {
  SGP_SKIP_WITHOUT_FASHION_MNIST();
  if (!can_emulate()) SGP_SKIP("needs root and iproute2 (ip, tc) to emulate hosts");
  sgp::testing::TempDir dir;
  const int before = namespaces_named("sgpe");
  // A small model (50,890 parameters: 204 kB a round to one out-neighbour) on a 50 Mbit/s link:
  // one round's push takes 33 ms on the wire, far more than its compute.
  constexpr double kRate = 50e6;
  const auto r = run_sgp("launch --topology " + topology_file("one-peer-exponential-4.dot") +
                         " --device cpu "
                         "--model mlp:64 --max-iterations 40 --link-rate 50mbit --run-dir " +
                         (dir / "run").string());
  INFO(r.output << slurp(dir / "run" / "peer-0.log"));
  REQUIRE(r.exit_code == 0);
  const auto topology = slurp(dir / "run" / "topology-emulated.dot");
  CHECK(topology.find("127.0.0.1") == std::string::npos);
  const auto s = nlohmann::json::parse(std::ifstream(dir / "run" / "summary.json"));
  // Complete: every peer ran every iteration, the monitor saw the end, no mass was lost.
  CHECK(s["iterations"] == 40);
  CHECK(s["peers"] == 4);
  CHECK(s["sum_of_weights"].get<double>() == doctest::Approx(4.0).epsilon(1e-12));
  CHECK(s["monitor_evaluations"].get<int>() >= 1);
  CHECK(s["final_consensus_error"].get<double>() < 1e-2);
  CHECK(s["final_average_model_accuracy"].get<double>() > 0.3);
  // The limit is applied: an iteration takes at least the time its bytes need at the rate (the
  // tbf bucket holds 16 KiB, 8% of a round's bytes; loopback would take well under 5 ms).
  const double bytes = s["bytes_sent_per_iteration"].get<double>();
  const double wire_ms = bytes * 8.0 / kRate * 1e3;
  CHECK(bytes > 200e3);
  CHECK(s["median_iteration_ms"].get<double>() >= 0.85 * wire_ms);
  // The hosts are gone with the run.
  CHECK(namespaces_named("sgpe") == before);
}

TEST_CASE(
    "sgp emulate up makes one limited host per rank and the topology for them; down removes them") {
  if (!can_emulate()) SGP_SKIP("needs root and iproute2 (ip, tc) to emulate hosts");
  sgp::testing::TempDir dir;
  const std::string prefix = "sgpt" + std::to_string(::getpid() % 100000);
  const auto up =
      run_sgp("emulate up --topology " + topology_file("ring-4.dot") + " --rate 100mbit --prefix " +
              prefix + " --out " + (dir / "t.dot").string());
  INFO(up.output);
  REQUIRE(up.exit_code == 0);
  CHECK(namespaces_named(prefix + "-") == 4);
  const auto qdisc = run_command("tc -n " + prefix + "-2 qdisc show dev eth0");
  CHECK(qdisc.output.find("tbf") != std::string::npos);
  CHECK(qdisc.output.find("100Mbit") != std::string::npos);
  const auto topology = slurp(dir / "t.dot");
  // Rank 2's endpoint is host 2's own address.
  const auto address = run_command("ip -n " + prefix +
                                   "-2 -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1");
  const std::string host2 = address.output.substr(0, address.output.find('\n'));
  CHECK(topology.find("tcp://" + host2 + ":29500") != std::string::npos);
  const auto down = run_sgp("emulate down --prefix " + prefix);
  INFO(down.output);
  CHECK(down.exit_code == 0);
  CHECK(namespaces_named(prefix + "-") == 0);
  CHECK(run_command("ip link show " + prefix + "-br").exit_code != 0);
}
