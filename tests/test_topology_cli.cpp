// `sgp topology ...` as a user runs it: exit statuses and messages.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <sstream>
#include <string>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "sgp/topology/dot_file.hpp"
#include "support/skip.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"
#include "support/text.hpp"

using sgp::testing::contains;
using sgp::testing::run_sgp;
using sgp::testing::slurp;

namespace {}  // namespace

TEST_CASE("generate writes a file that check accepts; stdout and --output agree") {
  sgp::testing::TempDir dir;
  const auto file = dir / "ope.dot";
  auto r = run_sgp("topology generate one-peer-exponential --peers 8 --self-weight 0.5 -o " +
                   file.string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto stdout_run =
      run_sgp("topology generate one-peer-exponential --peers 8 --self-weight 0.5");
  CHECK(stdout_run.output == slurp(file));
  CHECK(contains(stdout_run.output, "period=3;"));

  r = run_sgp("topology check --require-endpoints " + file.string());
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "ok: 8 peers, period 3, strongly connected"));

  // Exact average after log2 N = 3 rounds.
  r = run_sgp("topology describe " + file.string());
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "peers: 8"));
  // The bytes of the default model, W1 (669,706 parameters), not a round figure.
  CHECK(contains(r.output, "for 669706 parameters"));
  r = run_sgp("topology describe --model lenet " + file.string());
  CHECK(contains(r.output, "for 61706 parameters"));
  CHECK(contains(r.output, "predicted rounds to shrink the distance to consensus by 1e-06: 3 "));
}

TEST_CASE("generate: bad kinds and options are input errors (exit 2) that say why") {
  auto r = run_sgp("topology generate rnig --peers 4");
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "unknown topology kind 'rnig'"));
  r = run_sgp("topology generate hypercube --peers 6");
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "power of two"));
  r = run_sgp("topology generate ring --peers 4 --self-weight 1.5");
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "between 0 and 1"));
  sgp::testing::TempDir dir;
  std::ofstream(dir / "hosts") << "10.0.0.1\n10.0.0.2\n";
  r = run_sgp("topology generate ring --peers 3 --hosts " + (dir / "hosts").string());
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "2 [endpoint=\"tcp://10.0.0.1:29501\"];"));
}

TEST_CASE("readdress moves a keyed topology onto new hosts: same graph, new endpoints, no keys") {
  sgp::testing::TempDir dir;
  const auto plain = dir / "plain.dot", keyed = dir / "keyed.dot", moved = dir / "moved.dot";
  REQUIRE(run_sgp("topology generate one-peer-exponential --peers 6 --self-weight 0.3 -o " +
                  plain.string())
              .exit_code == 0);
  REQUIRE(run_sgp(fmt::format("keygen --topology {} --keys {} --out {}", plain.string(),
                              (dir / "keys").string(), keyed.string()))
              .exit_code == 0);
  // One host per rank, as a Slurm job places 4 + 2 tasks on two nodes.
  std::ofstream(dir / "hosts") << "10.0.0.1\n10.0.0.1\n10.0.0.1\n10.0.0.1\n10.0.0.2\n10.0.0.2\n";
  const auto r = run_sgp(fmt::format("topology readdress {} --hosts {} --base-port 7000 -o {}",
                                     keyed.string(), (dir / "hosts").string(), moved.string()));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  auto expected = sgp::topology::read_dot_file(plain);
  expected.set_endpoints({"tcp://10.0.0.1:7000", "tcp://10.0.0.1:7001", "tcp://10.0.0.1:7002",
                          "tcp://10.0.0.1:7003", "tcp://10.0.0.2:7000", "tcp://10.0.0.2:7001"});
  CHECK(sgp::topology::read_dot_file(moved) == expected);
  CHECK_FALSE(contains(slurp(moved), "public_key"));
  // The same placement from the two distinct hosts with --placement block (6 on 2: 3 + 3).
  REQUIRE(run_sgp(fmt::format("topology readdress {} --host 10.0.0.1,10.0.0.2 --placement block "
                              "--base-port 7000 -o {}",
                              plain.string(), moved.string()))
              .exit_code == 0);
  expected.set_endpoints({"tcp://10.0.0.1:7000", "tcp://10.0.0.1:7001", "tcp://10.0.0.1:7002",
                          "tcp://10.0.0.2:7000", "tcp://10.0.0.2:7001", "tcp://10.0.0.2:7002"});
  CHECK(sgp::topology::read_dot_file(moved) == expected);

  const auto bad =
      run_sgp("topology readdress " + plain.string() + " --host 10.0.0.1 --base-port 65533");
  CHECK(bad.exit_code == 2);
  CHECK(contains(bad.output, "outside 1..65535"));
}

TEST_CASE("describe: the directed ring with self weight 1/2 has rate cos(pi/N)") {
  sgp::testing::TempDir dir;
  const auto file = dir / "ring.dot";
  REQUIRE(
      run_sgp("topology generate ring --peers 8 --self-weight 0.5 -o " + file.string()).exit_code ==
      0);
  const auto r = run_sgp("topology describe --params 1000 " + file.string());
  INFO(r.output);
  CHECK(r.exit_code == 0);
  const double sigma = std::cos(std::numbers::pi / 8);
  CHECK(contains(r.output, fmt::format("= {:.6g}\n", sigma)));
  CHECK(contains(r.output, fmt::format(": {} (", std::ceil(std::log(1e-6) / std::log(sigma)))));
  CHECK(contains(r.output, "diameter of the union: 7 hops"));
  CHECK(contains(r.output, "mean 4080, max 4080"));
}

TEST_CASE("check rejects broken files with every problem, and disconnected ones") {
  sgp::testing::TempDir dir;
  std::ofstream(dir / "broken.dot") << "digraph {\n  0 -> 1 [weight=-1];\n  1 -> 3;\n}\n";
  auto r = run_sgp("topology check " + (dir / "broken.dot").string());
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "broken.dot: node 3: rank 3 is outside 0..2"));
  CHECK(contains(r.output, "broken.dot: rank 2 has no node"));
  CHECK(contains(r.output, "broken.dot: edge 0 -> 1: weight -1 is negative"));

  // Two problems of different kinds, both listed (issue 39, item 8): a bad weight and two
  // components.
  std::ofstream(dir / "two.dot") << "digraph { 0 -> 1; 1 -> 0; 2 -> 3 [weight=-0.5]; 3 -> 2 }\n";
  r = run_sgp("topology check " + (dir / "two.dot").string());
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "has 2 problems"));
  CHECK(contains(r.output, "edge 2 -> 3: weight -0.5 is negative"));
  CHECK(contains(r.output, "2 strongly connected components are: {0, 1} {2, 3}"));

  std::ofstream(dir / "oneway.dot") << "digraph { 0 -> 1; 0 -> 2; 1 -> 2 }\n";
  r = run_sgp("topology check " + (dir / "oneway.dot").string());
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "not strongly connected"));
  CHECK(contains(r.output, "components are: {0} {1} {2}"));

  r = run_sgp("topology check --require-endpoints " + (dir / "oneway.dot").string());
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "node 0: no endpoint"));

  r = run_sgp("topology check " + (dir / "missing.dot").string());
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "missing.dot: cannot open"));
}

TEST_CASE("every shipped topology passes check") {
  const char* source = std::getenv("SGP_SOURCE_DIR");
  REQUIRE(source != nullptr);
  int checked = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::filesystem::path(source) / "topologies")) {
    if (entry.path().extension() != ".dot") continue;
    const auto r = run_sgp("topology check --require-endpoints " + entry.path().string());
    INFO(r.output);
    CHECK(r.exit_code == 0);
    // base and hyper-hypercube (4, 8, 16 peers) are exact; so is the one-peer exponential graph
    // at these powers of two.
    const std::string stem = entry.path().stem().string();
    if (stem.starts_with("base-") || stem.starts_with("hyper-hypercube-"))
      CHECK(contains(r.output, "exact average after"));
    if (stem.starts_with("ring-")) CHECK_FALSE(contains(r.output, "exact"));
    ++checked;
  }
  CHECK(checked == 36);
}

TEST_CASE("generate base / hyper-hypercube: exact after one period, or exit 2 naming the rule") {
  sgp::testing::TempDir dir;
  const auto file = (dir / "base.dot").string();
  REQUIRE(run_sgp("topology generate base --peers 12 --degree 1 -o " + file).exit_code == 0);
  const auto described = run_sgp("topology describe --params 10 " + file);
  INFO(described.output);
  CHECK(contains(described.output, "exact average after 5 rounds"));
  CHECK(contains(described.output, "maximum degree in a round: out 1, in 1"));
  const auto refused = run_sgp("topology generate hyper-hypercube --peers 10 --degree 1");
  CHECK(refused.exit_code == 2);
  CHECK(contains(refused.output,
                 "every prime factor of the number of peers must be at most k+1 = 2"));
}

TEST_CASE("render shows every phase of a time-varying graph with the weights on its edges") {
  sgp::testing::TempDir dir;
  const auto file = dir / "ope.dot";
  REQUIRE(run_sgp("topology generate one-peer-exponential --peers 4 --self-weight 0.3 -o " +
                  file.string())
              .exit_code == 0);
  // To .dot: the drawing itself, without Graphviz.
  const auto drawing = dir / "drawing.dot";
  const auto r =
      sgp::testing::run_command("PATH=/nonexistent " + sgp::testing::sgp_binary().string() +
                                " topology render " + file.string() + " " + drawing.string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const std::string text = slurp(drawing);
  INFO(text);
  CHECK(contains(text, "4 peers, period 2"));
  CHECK(contains(text, "subgraph cluster_phase0 {\n    label=\"phase 0 (k % 2 == 0)\""));
  CHECK(contains(text, "subgraph cluster_phase1 {\n    label=\"phase 1 (k % 2 == 1)\""));
  CHECK_FALSE(contains(text, "cluster_phase2"));
  // Phase 0 pushes to the next rank, phase 1 two ranks on; each keeps 0.3 and pushes 0.7.
  CHECK(contains(text, "p0_3 -> p0_0 [label=\"0.7\""));
  CHECK(contains(text, "p1_3 -> p1_1 [label=\"0.7\""));
  CHECK_FALSE(contains(text, "p0_0 -> p0_2"));
  CHECK_FALSE(contains(text, "p1_0 -> p1_1"));
  CHECK(contains(text, "p1_2 [label=\"2\\nkeeps 0.3\""));

  // A hand-written file's own weights, phase by phase.
  std::ofstream(dir / "mixed.dot") << "digraph t { period=2; 0 -> 1 [phase=0, weight=0.25]; "
                                      "1 -> 0 [phase=0, weight=0.6]; 0 -> 1 [phase=1]; }\n";
  REQUIRE(run_sgp("topology render " + (dir / "mixed.dot").string() + " " +
                  (dir / "mixed-drawing.gv").string())
              .exit_code == 0);
  const std::string mixed = slurp(dir / "mixed-drawing.gv");
  INFO(mixed);
  CHECK(contains(mixed, "p0_0 -> p0_1 [label=\"0.25\""));
  CHECK(contains(mixed, "p0_0 [label=\"0\\nkeeps 0.75\""));
  CHECK(contains(mixed, "p0_1 -> p0_0 [label=\"0.6\""));
  CHECK(contains(mixed, "p1_0 -> p1_1 [label=\"0.5\""));  // uniform over out-degree + 1
  CHECK(contains(mixed, "p1_1 [label=\"1\\nkeeps 1\""));  // rank 1 pushes nothing in phase 1

  if (sgp::testing::run_command("command -v dot").exit_code != 0) {
    SGP_SKIP("the SVG: Graphviz `dot` is not installed (Debian package graphviz)");
  }
  // Through Graphviz: the picture carries the phase titles and the weights as text.
  REQUIRE(
      run_sgp("topology render " + file.string() + " " + (dir / "ope.svg").string()).exit_code ==
      0);
  const std::string svg = slurp(dir / "ope.svg");
  CHECK(contains(svg, ">phase 0 (k % 2 == 0)</text>"));
  CHECK(contains(svg, ">phase 1 (k % 2 == 1)</text>"));
  CHECK(contains(svg, ">0.7</text>"));
  CHECK(contains(svg, ">keeps 0.3</text>"));
}

TEST_CASE("render pins each phase's ranks on a circle, so a reversed ring looks reversed") {
  sgp::testing::TempDir dir;
  // 0 <- 1 <- 2 <- 3 <- 0: the ring run backwards.
  std::ofstream(dir / "reversed.dot") << "digraph t { 1 -> 0; 2 -> 1; 3 -> 2; 0 -> 3; }\n";
  REQUIRE(run_sgp("topology render " + (dir / "reversed.dot").string() + " " +
                  (dir / "reversed.gv").string())
              .exit_code == 0);
  const std::string text = slurp(dir / "reversed.gv");
  INFO(text);
  // Rank 0 at the top, then clockwise whatever the edges (radius 1.2 in for 4 peers).
  CHECK(contains(text, "layout=neato;"));
  CHECK(contains(text, "p0_0 [label=\"0\\nkeeps 0.5\", pos=\"0.000,1.200!\"]"));
  CHECK(contains(text, "p0_1 [label=\"1\\nkeeps 0.5\", pos=\"1.200,0.000!\"]"));
  CHECK(contains(text, "p0_2 [label=\"2\\nkeeps 0.5\", pos=\"0.000,-1.200!\"]"));
  CHECK(contains(text, "p0_3 [label=\"3\\nkeeps 0.5\", pos=\"-1.200,-0.000!\"]"));
  CHECK(contains(text, "p0_1 -> p0_0 [label=\"0.5\""));
}

TEST_CASE("render draws with Graphviz dot, and says so clearly when dot is missing") {
  sgp::testing::TempDir dir;
  const auto file = dir / "star.dot";
  REQUIRE(run_sgp("topology generate star --peers 5 -o " + file.string()).exit_code == 0);
  const auto missing = sgp::testing::run_command(
      "PATH=/nonexistent " + sgp::testing::sgp_binary().string() + " topology render " +
      file.string() + " " + (dir / "star.png").string());
  CHECK(missing.exit_code == 3);
  CHECK(contains(missing.output, "Graphviz `dot` was not found on PATH"));

  if (sgp::testing::run_command("command -v dot").exit_code != 0) {
    SGP_SKIP("the drawing itself: Graphviz `dot` is not installed (Debian package graphviz)");
  }
  const auto r = run_sgp("topology render " + file.string() + " " + (dir / "star.png").string());
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(slurp(dir / "star.png").rfind("\x89PNG", 0) == 0);
}
