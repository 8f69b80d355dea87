// Sweep files with command = "simulate" (src/experiment/simulate_sweep.hpp): the grid runs over
// sgp simulate's options, points are named by topology, N and the other grid keys, and what
// sgp simulate would refuse is refused with the file, position and key before anything runs.
#include <string>

#include <doctest/doctest.h>

#include "sgp/experiment/sweep_spec.hpp"
#include "support/input_error.hpp"
#include "support/text.hpp"

using sgp::experiment::parse_sweep_spec;
using sgp::testing::contains;

namespace {

std::string error_of(const std::string& text) {
  return sgp::testing::input_error_of([&] { parse_sweep_spec(text, "sweeps/sim.toml", false); });
}

}  // namespace

TEST_CASE("command = simulate: a grid over sgp simulate's options") {
  const std::string text = R"(
name = "sim"
command = "simulate"
[grid]
topology = ["ring", "exponential"]
peers = [8, 16]
drop = [0.0, 0.05]
[simulate]
mode = "async"
rounds = 40
fail = "1@5"
[quick]
rounds = 10
)";
  const auto spec = parse_sweep_spec(text, "sweeps/sim.toml", false);
  CHECK(spec.command == "simulate");
  REQUIRE(spec.points.size() == 8);
  CHECK(spec.points[0].name() == "ring_n8_drop-0.0");
  CHECK(spec.points[1].name() == "ring_n8_drop-0.05");
  CHECK(spec.points[7].name() == "exponential_n16_drop-0.05");
  const auto& s = spec.points[3].simulate;
  CHECK(s["topology"] == "ring");
  CHECK(s["peers"] == 16);
  CHECK(s["drop"] == 0.05);
  CHECK(s["rounds"] == 40);
  CHECK(s["fail"] == "1@5");
  CHECK(parse_sweep_spec(text, "sweeps/sim.toml", true).points[3].simulate["rounds"] == 10);
}

TEST_CASE("a simulate sweep runs over the optimizers: algo, momentum, global averaging") {
  const std::string head = R"(
name = "opt"
command = "simulate"
[grid]
topology = ["bidirectional-ring"]
peers = [16]
)";
  const auto spec = parse_sweep_spec(head + R"(algo = ["sgp", "gt", "agt"]
[simulate]
workload = "quadratic"
lr = 0.05
)",
                                     "sweeps/opt.toml", false);
  REQUIRE(spec.points.size() == 3);
  CHECK(spec.points[1].name() == "bidirectional-ring_n16_algo-gt");
  CHECK(spec.points[2].simulate["algo"] == "agt");
  const auto pga = parse_sweep_spec(head + R"(global_average_every = [1, 8]
[simulate]
workload = "quadratic"
momentum = 0.9
momentum_kind = "quasi-global"
slow_momentum = 0.5
)",
                                    "sweeps/opt.toml", false);
  REQUIRE(pga.points.size() == 2);
  CHECK(pga.points[1].name() == "bidirectional-ring_n16_global_average_every-8");
  CHECK(pga.points[1].simulate["slow_momentum"] == 0.5);
  // H = 0 with slow momentum is refused (it steps at the exact averages).
  CHECK(contains(error_of(head + "global_average_every = [0]\n[simulate]\nworkload = "
                                 "\"quadratic\"\nslow_momentum = 0.5\n"),
                 "--slow-momentum needs --global-average-every H"));
  CHECK(contains(error_of(head + "algo = [\"gt\"]\n[simulate]\nmode = \"async\"\n"),
                 "--mode async contradicts --algo gt"));
  CHECK(contains(error_of(head + "algo = [\"gt\"]\n"), "--algo gt is for --workload quadratic"));
  CHECK(contains(error_of(head + "momentum_kind = [\"quasi-global\"]\n[simulate]\nworkload = "
                                 "\"quadratic\"\n"),
                 "--momentum-kind quasi-global needs --momentum"));
  CHECK(contains(error_of(head + "algo = [\"asgp\"]\n[simulate]\nworkload = "
                                 "\"quadratic\"\nglobal_average_every = 4\n"),
                 "--global-average-every with --algo asgp"));
}

TEST_CASE("a simulate sweep takes {kind, degree} topologies: Base-2 and Base-3 side by side") {
  const auto spec = parse_sweep_spec(R"(
name = "sim"
command = "simulate"
[grid]
topology = ["ring", {kind = "base", degree = 1}, {kind = "base", degree = 2}]
peers = [12]
)",
                                     "sweeps/sim.toml", false);
  REQUIRE(spec.points.size() == 3);
  CHECK(spec.points[0].name() == "ring_n12");
  CHECK_FALSE(spec.points[0].simulate.contains("degree"));
  CHECK(spec.points[2].name() == "base-k2_n12");
  CHECK(spec.points[2].simulate["degree"] == 2);
  CHECK(contains(error_of("name = \"x\"\ncommand = \"simulate\"\n[grid]\ntopology = [{kind = "
                          "\"base\"}]\n"),
                 "grid.topology: a table must be {kind = \"<kind>\", degree = <k>}"));
  CHECK(contains(error_of("name = \"x\"\ncommand = \"simulate\"\n[grid]\ntopology = [{kind = "
                          "\"ring\", degree = 2}]\n"),
                 "--degree only applies to random-regular, hyper-hypercube and base, not ring"));
}

TEST_CASE("a simulate sweep refuses what sgp simulate would, naming file, position and key") {
  const std::string head = "name = \"x\"\ncommand = \"simulate\"\n[grid]\n";
  CHECK(
      contains(error_of(head + "epochs = [1]\n"),
               "sim.toml:4:1: grid.epochs: unknown key for sgp simulate (valid: topology, peers"));
  CHECK(contains(error_of(head + "dim = [0]\n"),
                 "sim.toml:4:8: grid.dim: expected an integer in [1, 268435456], got 0"));
  CHECK(contains(error_of(head + "mode = [\"lazy\"]\n"),
                 "grid.mode: 'lazy' is not one of sync, async"));
  CHECK(contains(error_of(head + "drop = [0.1]\n"), "--drop needs an asynchronous algorithm"));
  CHECK(contains(error_of(head + "peers = [8]\n[simulate]\nlr = 0.1\n"),
                 "--lr is for --workload quadratic"));
  CHECK(contains(error_of(head + "peers = [8]\n[simulate]\nfail = \"3\"\n"),
                 "sim.toml:6:8: simulate.fail: '3': expected RANK@ROUND"));
  CHECK(contains(error_of(head + "peers = [8, 4]\n[simulate]\nfail = \"5@2\"\n"),
                 "one-peer-exponential with 4 peers: --fail 5@2: rank 5 is not one of the 4"));
  CHECK(contains(error_of(head + "topology = [\"torus\"]\npeers = [7]\n"), "torus with 7 peers"));
  CHECK(contains(error_of(head + "peers = [8]\n[train]\nepochs = 1.0\n"),
                 "train: is for sgp launch; a simulate sweep's fixed options go in [simulate]"));
  CHECK(contains(error_of("name = \"x\"\n[grid]\npeers = [8]\n[simulate]\ndim = 4\n"),
                 "simulate: needs command = \"simulate\""));
  CHECK(contains(error_of("name = \"x\"\ncommand = \"train\"\n[grid]\npeers = [8]\n"),
                 "sim.toml:2:11: command: expected \"launch\" (the default) or \"simulate\""));
}
