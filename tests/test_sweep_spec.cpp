// Sweep files (sgp/experiment/sweep_spec.hpp): grid expansion, [train]/[quick], and errors that
// name the file, the position and the key.
#include <cmath>
#include <fstream>
#include <numbers>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "sgp/error.hpp"
#include "sgp/experiment/sweep_aggregate.hpp"
#include "sgp/experiment/sweep_plan.hpp"
#include "sgp/experiment/sweep_spec.hpp"
#include "support/input_error.hpp"
#include "support/temp_dir.hpp"
#include "support/text.hpp"

using sgp::experiment::parse_sweep_spec;
using sgp::experiment::SweepSpec;
using sgp::testing::contains;

namespace {

SweepSpec parse(const std::string& text, bool quick = false) {
  return parse_sweep_spec(text, "sweeps/test.toml", quick);
}

// The InputError message of parsing `text` ("" when it parses).
std::string error_of(const std::string& text) {
  return sgp::testing::input_error_of([&] { parse(text); });
}

}  // namespace

TEST_CASE("a grid expands to every combination, algo outermost, with readable names") {
  const auto spec = parse(R"(
name = "demo"
[grid]
topology = ["ring", "complete"]
peers = [4, 8]
self_weight = [0.5]
algo = ["sgp"]
seed = [0, 1]
[train]
epochs = 2
hidden = [32]
max_iterations = 30
lr_decay = "constant"
nesterov = false
[quick]
epochs = 0.5
)");
  CHECK(spec.name == "demo");
  REQUIRE(spec.points.size() == 8);
  CHECK(spec.points[0].name() == "ring_n4_a0.5_sgp_h1_s0");
  CHECK(spec.points[1].name() == "ring_n4_a0.5_sgp_h1_s1");
  CHECK(spec.points[2].name() == "ring_n8_a0.5_sgp_h1_s0");
  CHECK(spec.points[7].name() == "complete_n8_a0.5_sgp_h1_s1");
  const auto& p = spec.points[3];
  CHECK(p.topology == "ring");
  CHECK_FALSE(p.topology_is_file);
  CHECK(p.peers == 8);
  CHECK(p.config.seed == 1);
  CHECK(p.config.self_weight == 0.5);
  CHECK(p.config.algo == sgp::config::Algorithm::sgp);
  CHECK(p.config.epochs == 2.0);
  CHECK(p.config.model == "mlp:32");
  CHECK(p.config.max_iterations == 30);
  CHECK(p.config.lr_decay == sgp::model::LrDecay::constant);
  CHECK_FALSE(p.config.nesterov);
  CHECK(p.config.topology.empty());
  CHECK(p.config.run_dir.empty());
  // --quick replaces only what [quick] names.
  const auto quick = parse_sweep_spec(R"(
name = "demo"
[grid]
topology = "ring"
[train]
epochs = 2
hidden = [32]
[quick]
epochs = 0.5
)",
                                      "x.toml", true);
  REQUIRE(quick.points.size() == 1);
  CHECK(quick.points[0].config.epochs == 0.5);
  CHECK(quick.points[0].config.model == "mlp:32");
  CHECK(quick.points[0].name() == "ring_n8_auniform_sgp_h1_s0");
}

TEST_CASE("topology_for_algo pairs algos with their topologies; dpsgd/exact/local ignore a") {
  const auto spec = parse(R"(
name = "algos"
[grid]
topology = ["one-peer-exponential"]
peers = [8]
self_weight = [0.3, 0.5]
algo = ["local", "dpsgd", "sgp", "exact"]
gossip_every = [2]
[grid.topology_for_algo]
dpsgd = ["bidirectional-ring"]
exact = "complete"
)");
  std::vector<std::string> names;
  for (const auto& p : spec.points) names.push_back(p.name());
  CHECK(names == std::vector<std::string>{
                     "one-peer-exponential_n8_auniform_local_h2_s0",
                     "bidirectional-ring_n8_auniform_dpsgd_h2_s0",
                     "one-peer-exponential_n8_a0.3_sgp_h2_s0",
                     "one-peer-exponential_n8_a0.5_sgp_h2_s0",
                     "complete_n8_auniform_exact_h2_s0",
                 });
  CHECK(spec.points[3].config.gossip_every == 2);
}

TEST_CASE("compress is swept for push-sum algorithms only; allreduce and local keep float32") {
  const auto spec = parse(R"(
name = "bytes"
[grid]
topology = ["one-peer-exponential"]
peers = [4]
algo = ["osgp", "allreduce", "local"]
compress = ["none", "fp16"]
)");
  std::vector<std::pair<std::string, std::string>> points;
  for (const auto& p : spec.points) {
    points.emplace_back(sgp::name_of(p.config.algo), sgp::gossip::name_of(p.config.compress));
  }
  CHECK(points ==
        std::vector<std::pair<std::string, std::string>>{
            {"osgp", "none"}, {"osgp", "fp16"}, {"allreduce", "none"}, {"local", "none"}});
  std::set<std::string> names;
  for (const auto& p : spec.points) names.insert(p.name());
  CHECK(names.size() == 4);
}

TEST_CASE("a topology file is resolved against the sweep file and fixes N") {
  sgp::testing::TempDir dir("sgp-sweep-spec");
  std::ofstream(dir / "tiny.dot") << "digraph t { 0 -> 1; 1 -> 0; }\n";
  const auto spec = parse_sweep_spec(R"(
name = "files"
[grid]
topology = ["tiny.dot"]
peers = [4, 8]
)",
                                     dir / "sweep.toml", false);
  REQUIRE(spec.points.size() == 1);
  CHECK(spec.points[0].topology_is_file);
  CHECK(spec.points[0].topology == (dir / "tiny.dot").string());
  CHECK(spec.points[0].peers == 2);
  CHECK(spec.points[0].name() == "tiny_n2_auniform_sgp_h1_s0");
}

TEST_CASE("a topology table pairs a kind with its own N; a file's N is checked, not overridden") {
  sgp::testing::TempDir dir("sgp-sweep-spec");
  std::ofstream(dir / "three.dot") << "digraph t { 0 -> 1; 1 -> 2; 2 -> 0; }\n";
  const auto spec = parse_sweep_spec(R"(
name = "own-n"
[grid]
topology = [{kind = "ring", peers = 6}, {kind = "torus", peers = [4, 9]}, "complete",
            {kind = "three.dot"}]
peers = [5]
)",
                                     dir / "sweep.toml", false);
  std::vector<std::string> names;
  for (const auto& p : spec.points) names.push_back(p.name());
  CHECK(names ==
        std::vector<std::string>{"ring_n6_auniform_sgp_h1_s0", "torus_n4_auniform_sgp_h1_s0",
                                 "torus_n9_auniform_sgp_h1_s0", "complete_n5_auniform_sgp_h1_s0",
                                 "three_n3_auniform_sgp_h1_s0"});
  CHECK(spec.points[0].peers == 6);
  CHECK(spec.points[4].peers == 3);

  // topology_for_algo takes the same tables.
  const auto per_algo = parse(R"(
name = "x"
[grid]
algo = ["sgp", "exact"]
topology = ["ring"]
peers = [4]
[grid.topology_for_algo]
exact = {kind = "complete", peers = 8}
)");
  REQUIRE(per_algo.points.size() == 2);
  CHECK(per_algo.points[1].name() == "complete_n8_auniform_exact_h1_s0");

  const auto error = [&](const std::string& text) {
    return sgp::testing::input_error_of([&] { parse_sweep_spec(text, dir / "sweep.toml", false); });
  };
  CHECK(contains(error("name = \"x\"\n[grid]\ntopology = [{kind = \"three.dot\", peers = 4}]\n"),
                 "sweep.toml:3:42: grid.topology.peers: " + (dir / "three.dot").string() +
                     " has 3 peers: a DOT file fixes N itself"));
  CHECK(contains(error("name = \"x\"\n[grid]\ntopology = [{kind = \"torus\", peers = 7}]\n"),
                 "grid.topology: torus with 7 peers"));
  CHECK(contains(error("name = \"x\"\n[grid]\ntopology = [{peers = 4}]\n"),
                 "sweep.toml:3:13: grid.topology: a table needs kind"));
  CHECK(contains(error("name = \"x\"\n[grid]\ntopology = [{kind = \"ring\", n = 4}]\n"),
                 "grid.topology.n: unknown key (valid: kind, peers, and degree for a kind)"));
  CHECK(contains(error("name = \"x\"\n[grid]\ntopology = [{kind = \"ring\", degree = 2}]\n"),
                 "grid.topology: ring with 8 peers: --degree only applies to"));
  CHECK(contains(error("name = \"x\"\n[grid]\ntopology = [{kind = \"hyper-hypercube\", "
                       "degree = 1}]\npeers = [6]\n"),
                 "every prime factor of the number of peers must be at most k+1 = 2"));
  // Base-2 and Base-3 side by side: the degree names the point and reaches the topology.
  const auto both = parse_sweep_spec(
      "name = \"x\"\n[grid]\ntopology = [{kind = \"base\", degree = 1}, {kind = \"base\", "
      "degree = 2}]\npeers = [6]\n",
      dir / "sweep.toml", false);
  REQUIRE(both.points.size() == 2);
  CHECK(both.points[0].name() == "base-k1_n6_auniform_sgp_h1_s0");
  CHECK(both.points[1].name() == "base-k2_n6_auniform_sgp_h1_s0");
  CHECK(both.points[1].topology_degree == 2);
  CHECK(contains(error("name = \"x\"\n[grid]\ntopology = [{kind = \"ring\", peers = 1}]\n"),
                 "grid.topology.peers: expected an integer in [2, 4096], got 1"));
  // A broken DOT file is refused when the sweep is read, naming the sweep line and the file.
  std::ofstream(dir / "broken.dot") << "digraph t { 0 -> 1 [weight=2]; }\n";
  const auto broken = error("name = \"x\"\n[grid]\ntopology = [\"broken.dot\"]\n");
  CHECK(contains(broken, "sweep.toml:3:13: grid.topology: "));
  CHECK(contains(broken, "broken.dot"));
}

TEST_CASE("errors name the file, the line:column and the key") {
  SUBCASE("unknown key in [train]") {
    const auto e = error_of("name = \"x\"\n[grid]\ntopology = [\"ring\"]\n[train]\nepoch = 1\n");
    CHECK(contains(e, "sweeps/test.toml:5:1: train.epoch: unknown key"));
    CHECK(contains(e, "epochs"));  // lists the valid keys
  }
  SUBCASE("unknown key in [grid]") {
    const auto e = error_of("name = \"x\"\n[grid]\ntopologies = [\"ring\"]\n");
    CHECK(contains(e, "sweeps/test.toml:3:1: grid.topologies: unknown key"));
  }
  SUBCASE("unknown top-level key") {
    CHECK(contains(error_of("name = \"x\"\ngird = 1\n[grid]\npeers = [4]\n"),
                   "test.toml:2:1: gird: unknown key"));
  }
  SUBCASE("wrong type") {
    const auto e = error_of("name = \"x\"\n[grid]\npeers = [4, \"8\"]\n");
    CHECK(contains(e, "test.toml:3:13: grid.peers: expected an integer, got a string"));
    CHECK(contains(error_of("name = \"x\"\n[grid]\npeers = [4]\n[train]\nlr = \"fast\"\n"),
                   "test.toml:5:6: train.lr: expected a number, got \"fast\""));
    CHECK(contains(error_of("name = \"x\"\n[grid]\npeers = [4]\n[quick]\nnesterov = 1\n"),
                   "test.toml:5:12: quick.nesterov: expected true or false, got 1"));
    CHECK(contains(error_of("name = 3\n[grid]\npeers = [4]\n"), "name: expected a string"));
  }
  SUBCASE("empty grid and empty lists") {
    CHECK(contains(error_of("name = \"x\"\n[grid]\n"), "test.toml: grid: empty"));
    CHECK(contains(error_of("name = \"x\"\n"), "test.toml: grid: missing"));
    CHECK(contains(error_of("name = \"x\"\n[grid]\nself_weight = []\n"),
                   "test.toml:3:15: grid.self_weight: empty list"));
  }
  SUBCASE("bad values, also in [train] and [quick]") {
    // Each sweep file (after `name = "x"` and `[grid]`) and what its error must say.
    const std::pair<const char*, const char*> cases[] = {
        {"self_weight = [0.5, 1.5]\n",
         "test.toml:3:21: grid.self_weight: expected a mixing rate in (0, 1)"},
        {"algo = [\"sgd\"]\n",
         "grid.algo: 'sgd' is not one of sgp, osgp, asgp, local, dpsgd, exact"},
        {"peers = [1]\n", "grid.peers: expected an integer in [2, 4096], got 1"},
        {"topology = [\"rign\"]\n",
         "test.toml:3:13: grid.topology: 'rign' is neither a topology kind"},
        {"topology = [\"torus\"]\npeers = [7]\n", "grid.topology: torus with 7 peers"},
        {"peers = [4]\n[train]\nepochs = 0\n",
         "test.toml:5:10: train.epochs: expected a number in (0, 10000], got 0"},
        {"algo = [\"sgp\"]\n[grid.topology_for_algo]\nexact = [\"complete\"]\n",
         "grid.topology_for_algo.exact: 'exact' is not in grid.algo"},
        {"peers = [4, 4]\n", "two points are both named one-peer-exponential_n4"},
        {"peers = [4]\n[quick]\nmomentum = 1.5\n",
         "test.toml:5:12: quick.momentum: expected a number in [0, 1), got 1.5"},
        {"peers = [4]\n[train]\nlr = nan\n", "train.lr: expected a number in [0, 1000], got nan"},
        {"peers = [4]\n[train]\nlr_decay = \"linear\"\n",
         "train.lr_decay: 'linear' is not one of constant, step, cosine"},
        {"peers = [4]\n[train]\nhidden = [64, 0]\n",
         "test.toml:5:15: train.hidden: expected an integer in [1, 65536], got 0"},
    };
    for (const auto& [grid, expected] : cases) {
      const std::string file = std::string("name = \"x\"\n[grid]\n") + grid;
      CAPTURE(file);
      CHECK(contains(error_of(file), expected));
    }
    CHECK(contains(error_of("name = \"a/b\"\n[grid]\npeers = [4]\n"), "test.toml:1:8: name:"));
  }
  SUBCASE("a grid of more than 10,000 points is refused before it is expanded") {
    // 30^4 x 20 = 16.2 million points from a few hundred bytes: expanding them took minutes.
    std::string text = "name = \"x\"\n[grid]\npeers = [4]\n";
    const auto list = [](const std::string& key, int count, const std::string& prefix) {
      std::string line = key + " = [";
      for (int i = 1; i <= count; ++i)
        line += (i > 1 ? ", " : "") + prefix + std::to_string(100 + i);  // distinct values
      return line + "]\n";
    };
    text += list("lr", 30, "0.0") + list("momentum", 30, "0.0") + list("seed", 30, "") +
            list("batch_size", 30, "") + list("weight_decay", 20, "0.0");
    CHECK(contains(error_of(text), "test.toml: grid: more than 10000 points"));
    // 30 x 30 x 11 = 9,900 points is within the limit.
    text = "name = \"x\"\n[grid]\npeers = [4]\n" + list("lr", 30, "0.0") + list("seed", 30, "") +
           list("batch_size", 11, "");
    CHECK(parse(text).points.size() == 9900);
  }
  SUBCASE("TOML syntax") { CHECK(contains(error_of("name = \"x\"\n[grid\n"), "test.toml:2:")); }
}

TEST_CASE("read_sweep_file names a missing file") {
  CHECK_THROWS_WITH_AS(sgp::experiment::read_sweep_file("/nonexistent/s.toml", false),
                       doctest::Contains("/nonexistent/s.toml: cannot read"), sgp::InputError);
}

TEST_CASE("partition is a grid key (named in the point); model a [train] key") {
  const auto spec = parse(R"(
name = "skew"
[grid]
topology = ["ring"]
partition = ["iid", "dirichlet:0.1", "shards:2"]
[train]
model = "lenet"
)");
  REQUIRE(spec.points.size() == 3);
  CHECK(spec.points[0].name() == "ring_n8_auniform_sgp_h1_s0_partition-iid");
  CHECK(spec.points[1].name() == "ring_n8_auniform_sgp_h1_s0_partition-dirichlet-0.1");
  CHECK(spec.points[2].name() == "ring_n8_auniform_sgp_h1_s0_partition-shards-2");
  CHECK(spec.points[1].config.partition == "dirichlet:0.1");
  CHECK(spec.points[2].config.model == "lenet");
  CHECK(error_of("name = \"x\"\n[grid]\npartition = [\"dirichlet:0\"]\n") ==
        "sweeps/test.toml:3:14: grid.partition: 'dirichlet:0' is not a partition: ALPHA of "
        "dirichlet:ALPHA must be a positive number, e.g. dirichlet:0.1");
  CHECK(contains(error_of("name = \"x\"\n[grid]\npeers = [4]\n[train]\nmodel = \"vgg\"\n"),
                 "sweeps/test.toml:5:9: train.model: 'vgg' is not a model"));
}

TEST_CASE("link_rate is a grid key: one sweep compares algorithms across bandwidths") {
  const auto spec = parse(R"(
name = "bandwidth"
[grid]
topology = ["one-peer-exponential"]
peers = [4]
algo = ["sgp", "osgp"]
link_rate = ["unlimited", "1gbit", "100mbit"]
)");
  REQUIRE(spec.points.size() == 6);
  CHECK(spec.points[0].name() == "one-peer-exponential_n4_auniform_sgp_h1_s0_link_rate-unlimited");
  CHECK(spec.points[4].name() == "one-peer-exponential_n4_auniform_osgp_h1_s0_link_rate-1gbit");
  CHECK(spec.points[5].config.link_rate == "100mbit");
  CHECK(error_of("name = \"x\"\n[grid]\nlink_rate = [\"fast\"]\n") ==
        "sweeps/test.toml:3:14: grid.link_rate: 'fast': no unit (bit, kbit, mbit or gbit) "
        "(expected none, unlimited or a rate such as 100mbit, 1gbit)");
}

TEST_CASE("the sweep's aggregate: mean, sample sd and n per configuration over its seeds") {
  using Table = std::vector<std::vector<std::string>>;
  const Table summary = {
      {"point", "algo", "partition", "seed", "status", "predicted_consensus_rate",
       "final_average_model_accuracy", "final_consensus_error", "median_iteration_ms", "run_dir"},
      {"a0", "sgp", "dirichlet:0.1", "0", "finished", "0.5", "0.7", "1e-6", "10", "a0"},
      {"b0", "dpsgd", "dirichlet:0.1", "0", "finished", "0.5", "0.6", "", "20", "b0"},
      {"a1", "sgp", "dirichlet:0.1", "1", "finished", "0.5", "0.8", "3e-6", "14", "a1"},
      {"a2", "sgp", "dirichlet:0.1", "2", "failed", "0.5", "", "", "", "a2"},
      {"b1", "dpsgd", "dirichlet:0.1", "1", "finished", "0.5", "0.6", "", "22", "b1"}};
  const Table aggregate = sgp::experiment::aggregate_table(summary);
  REQUIRE(aggregate.size() == 3);
  CHECK(aggregate[0] == std::vector<std::string>{
                            "algo", "partition", "predicted_consensus_rate", "n",
                            "final_average_model_accuracy_mean", "final_average_model_accuracy_sd",
                            "final_consensus_error_mean", "final_consensus_error_sd",
                            "median_iteration_ms_mean", "median_iteration_ms_sd"});
  const auto& sgp = aggregate[1];  // the failed seed does not count
  CHECK(sgp[0] == "sgp");
  CHECK(sgp[3] == "2");
  CHECK(std::stod(sgp[4]) == doctest::Approx(0.75));
  CHECK(std::stod(sgp[5]) == doctest::Approx(std::sqrt(0.005)));
  CHECK(std::stod(sgp[6]) == doctest::Approx(2e-6));
  CHECK(std::stod(sgp[8]) == doctest::Approx(12.0));
  const auto& dpsgd = aggregate[2];
  CHECK(dpsgd[0] == "dpsgd");
  CHECK(std::stod(dpsgd[5]) == 0.0);  // two equal seeds
  CHECK(dpsgd[6].empty());            // no consensus error in either
  const auto lines = sgp::experiment::aggregate_lines(aggregate);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] ==
        "algo=sgp: average-model accuracy 75.00 ± 7.07% (n=2), mean peer accuracy -, consensus "
        "error 2e-06 ± 1.4e-06, 12.00 ± 2.83 ms/it");
  CHECK(lines[1] ==
        "algo=dpsgd: average-model accuracy 60.00 ± 0.00% (n=2), mean peer accuracy -, consensus "
        "error -, 21.00 ± 1.41 ms/it");
}

TEST_CASE("an allreduce point has no predicted rate or self weight: it averages exactly") {
  const auto spec = parse(R"(
name = "exactness"
[grid]
topology = ["ring"]
peers = [4]
algo = ["sgp", "allreduce"]
)");
  REQUIRE(spec.points.size() == 2);
  const auto sgp = sgp::experiment::plan_point(spec.points[0], "results");
  CHECK(*sgp.rate == doctest::Approx(std::cos(std::numbers::pi / 4)));
  CHECK(*sgp.mixing_self_weight == doctest::Approx(0.5));
  const auto allreduce = sgp::experiment::plan_point(spec.points[1], "results");
  REQUIRE(allreduce.schedule);
  CHECK_FALSE(allreduce.rate);  // not the ring's cos(pi / 4) (issue 39, item 6)
  CHECK_FALSE(allreduce.mixing_self_weight);
}
