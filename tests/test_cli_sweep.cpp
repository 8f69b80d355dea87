// `sgp sweep` as a user runs it: a 2-point sweep end to end (real peers on real data), the
// summary table, resuming, failures that do not stop the sweep, and `scripts/plot` on the result.
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "support/skip.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"
#include "support/text.hpp"

using sgp::testing::contains;
using sgp::testing::run_command;
using sgp::testing::run_sgp;

namespace {

// The fields of a CSV line (no quoting: sweep tables hold none); a trailing comma ends an empty
// one.
std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> fields;
  std::stringstream s(line);
  std::string field;
  while (std::getline(s, field, ',')) fields.push_back(field);
  if (!line.empty() && line.back() == ',') fields.emplace_back();
  return fields;
}

std::vector<std::vector<std::string>> read_csv(const std::filesystem::path& path) {
  std::vector<std::vector<std::string>> rows;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) rows.push_back(split_csv_line(line));
  return rows;
}

std::string column(const std::vector<std::vector<std::string>>& csv, std::size_t row,
                   const std::string& name) {
  for (std::size_t c = 0; c < csv[0].size(); ++c)
    if (csv[0][c] == name) return csv.at(row).at(c);
  FAIL("no column " << name);
  return "";
}

// summary.csv's header, the contract with the plot scripts: the grid's columns, then the results'.
const std::vector<std::string> kColumns = split_csv_line(
    "point,topology,peers,self_weight,algo,gossip_every,seed,status,mixing_self_weight,"
    "predicted_consensus_rate,topology_period,iterations,final_average_model_accuracy,"
    "mean_peer_accuracy,min_peer_accuracy,max_peer_accuracy,final_consensus_error,"
    "median_iteration_ms,bytes_sent_per_iteration,wall_time_s,sum_of_weights,run_dir");

// Both points of the tiny sweep finished, with the figures their topologies must give.
void check_finished_table(const std::vector<std::vector<std::string>>& csv,
                          const std::filesystem::path& root) {
  for (std::size_t row = 1; row <= 2; ++row) {
    REQUIRE(csv[row].size() == kColumns.size());
    CHECK(column(csv, row, "status") == "finished");
    CHECK(column(csv, row, "peers") == "4");
    CHECK(column(csv, row, "iterations") == "30");
    // 30 iterations reach ~0.75 (chance: 0.1).
    CHECK(std::stod(column(csv, row, "final_average_model_accuracy")) > 0.6);
    CHECK(std::stod(column(csv, row, "sum_of_weights")) == doctest::Approx(4.0).epsilon(1e-6));
    CHECK(std::filesystem::exists(root / column(csv, row, "point") / "monitor.jsonl"));
    CHECK(std::filesystem::exists(root / column(csv, row, "point") / "topology.dot"));
  }
  CHECK(column(csv, 1, "topology") == "ring");
  // Local-only peers of this sweep end 0.077 apart; the ring gossips to ~1e-6, the complete
  // graph averages exactly every round.
  CHECK(std::stod(column(csv, 1, "final_consensus_error")) < 1e-4);
  CHECK(std::stod(column(csv, 2, "final_consensus_error")) < 1e-10);
  // Directed ring of 4 with weights 1/2: sigma = cos(pi / 4); complete with 1/4: sigma = 0.
  CHECK(std::stod(column(csv, 1, "predicted_consensus_rate")) ==
        doctest::Approx(0.7071067811865476).epsilon(1e-9));
  CHECK(std::stod(column(csv, 1, "mixing_self_weight")) == doctest::Approx(0.5));
  CHECK(std::stod(column(csv, 2, "predicted_consensus_rate")) == doctest::Approx(0.0));
  CHECK(std::stod(column(csv, 2, "mixing_self_weight")) == doctest::Approx(0.25));
}

// The aggregate: one configuration per topology, one seed each; printed too, and every figure
// the sweep prints is rounded (not 27.856711999999998 ms/it).
void check_aggregate(const std::vector<std::vector<std::string>>& csv,
                     const std::filesystem::path& root, const std::string& output) {
  const auto aggregate = read_csv(root / "aggregate.csv");
  REQUIRE(aggregate.size() == 3);
  CHECK(column(aggregate, 1, "topology") == "ring");
  CHECK(column(aggregate, 1, "n") == "1");
  CHECK(column(aggregate, 1, "final_average_model_accuracy_mean") ==
        column(csv, 1, "final_average_model_accuracy"));
  CHECK(contains(output, "per configuration, over its finished seeds"));
  CHECK(contains(output, "topology=ring mixing_self_weight=0.5 predicted_consensus_rate=0.7071: "));
  const std::regex figures(R"(: average-model accuracy \d+\.\d\d%.*, \d+\.\d\d ms/it)");
  int rounded = 0;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("ms/it") == std::string::npos) continue;
    CAPTURE(line);
    CHECK(std::regex_search(line, figures));
    ++rounded;
  }
  CHECK(rounded == 4);  // two points, two configurations
}

// A point without summary.json (as after an interrupt) is redone from scratch; the other is kept.
void check_unfinished_point_redone(const std::string& run, const std::filesystem::path& root) {
  const auto ring = root / "ring_n4_auniform_sgp_h1_s0";
  std::filesystem::remove(ring / "summary.json");
  std::ofstream(ring / "stale-file") << "left over";
  const auto resumed = run_sgp(run);
  INFO(resumed.output);
  CHECK(resumed.exit_code == 0);
  CHECK(contains(resumed.output, "1 already finished, 1 to run"));
  CHECK(contains(resumed.output, "[1/2] ring_n4_auniform_sgp_h1_s0: removing the unfinished"));
  CHECK(contains(resumed.output, "[2/2] complete_n4_auniform_sgp_h1_s0: already finished"));
  CHECK(std::filesystem::exists(ring / "summary.json"));
  CHECK_FALSE(std::filesystem::exists(ring / "stale-file"));
  const auto csv_after = read_csv(root / "summary.csv");
  REQUIRE(csv_after.size() == 3);
  CHECK(column(csv_after, 1, "status") == "finished");
  CHECK(column(csv_after, 2, "status") == "finished");
}

// scripts/plot writes every plot file, non-empty, as a PNG or PDF.
void check_plots(const std::filesystem::path& root) {
  const auto plot = run_command("/usr/bin/python3 " + sgp::testing::source_path("scripts/plot") +
                                " " + root.string());
  INFO(plot.output);
  REQUIRE(plot.exit_code == 0);
  for (const std::string name : {"consensus_vs_accuracy", "accuracy", "loss", "consensus_error",
                                 "accuracy_vs_self_weight", "consensus_error_vs_self_weight"}) {
    for (const std::string ext : {"png", "pdf"}) {
      const auto file = root / "plots" / (name + "." + ext);
      INFO(file.string());
      REQUIRE(std::filesystem::exists(file));
      CHECK(std::filesystem::file_size(file) > 1000);
      std::ifstream in(file, std::ios::binary);
      std::string head(8, '\0');
      in.read(head.data(), 8);
      CHECK(head == (ext == "png" ? std::string("\x89PNG\r\n\x1a\n", 8)
                                  : std::string("%PDF-1.") + head[7]));
    }
  }
}

}  // namespace

TEST_CASE("a 2-point sweep runs end to end, resumes, and plots") {
  SGP_SKIP_WITHOUT_FASHION_MNIST();
  sgp::testing::TempDir dir("sgp-sweep");
  std::ofstream(dir / "tiny.toml") << R"(
name = "tiny"
[grid]
topology = ["ring", "complete"]
peers = [4]
[train]
hidden = [32]
max_iterations = 30
eval_every = 0.02
log_every = 5
device = "cpu"
timeout_ms = 20000
)";
  const auto results = dir / "results";
  const std::string run =
      "sweep " + (dir / "tiny.toml").string() + " --results " + results.string();

  // A dry run lists the points and writes nothing.
  const auto dry = run_sgp(run + " --dry-run");
  INFO(dry.output);
  CHECK(dry.exit_code == 0);
  CHECK(contains(dry.output, "ring_n4_auniform_sgp_h1_s0"));
  CHECK(contains(dry.output, "complete_n4_auniform_sgp_h1_s0"));
  CHECK(contains(dry.output, "sigma per period"));  // the rate's unit (issue 39, item 8)
  CHECK_FALSE(std::filesystem::exists(results));

  const auto first = run_sgp(run);
  INFO(first.output);
  REQUIRE(first.exit_code == 0);
  CHECK(contains(first.output, "[1/2] ring_n4_auniform_sgp_h1_s0"));
  CHECK(contains(first.output, "[2/2] complete_n4_auniform_sgp_h1_s0"));
  const auto root = results / "tiny";
  const auto csv = read_csv(root / "summary.csv");
  REQUIRE(csv.size() == 3);
  CHECK(csv[0] == kColumns);
  check_finished_table(csv, root);
  check_aggregate(csv, root, first.output);

  // Re-running skips both finished points and leaves the table as it was.
  const auto again = run_sgp(run);
  INFO(again.output);
  CHECK(again.exit_code == 0);
  CHECK(contains(again.output, "2 already finished, 0 to run"));
  CHECK(contains(again.output, "[1/2] ring_n4_auniform_sgp_h1_s0: already finished, skipped"));
  CHECK(read_csv(root / "summary.csv") == csv);

  check_unfinished_point_redone(run, root);

  check_plots(root);
}

TEST_CASE("failed points are reported with their logs and the sweep goes on") {
  sgp::testing::TempDir dir("sgp-sweep-fail");
  // dpsgd on the directed ring cannot run (it needs every edge both ways); the sgp point starts
  // and fails on the missing data set.
  std::ofstream(dir / "broken.toml") << R"(
name = "broken"
[grid]
topology = ["ring"]
peers = [4]
algo = ["dpsgd", "sgp"]
[train]
data_dir = "/nonexistent-sgp-data"
max_iterations = 5
)";
  const auto result = run_sgp("sweep " + (dir / "broken.toml").string() + " --results " +
                              (dir / "results").string());
  INFO(result.output);
  CHECK(result.exit_code == 3);
  CHECK(contains(result.output, "2 of 2 points failed"));
  CHECK(contains(result.output, "ring_n4_auniform_dpsgd_h1_s0: "));
  CHECK(contains(result.output, "needs an undirected topology"));
  CHECK(contains(result.output, "ring_n4_auniform_sgp_h1_s0: sgp launch exited with code"));
  CHECK(contains(result.output, "/nonexistent-sgp-data"));
  CHECK(contains(result.output,
                 "logs in " + (dir / "results/broken/ring_n4_auniform_sgp_h1_s0").string()));
  const auto csv = read_csv(dir / "results/broken/summary.csv");
  REQUIRE(csv.size() == 3);
  CHECK(column(csv, 1, "status") == "failed");
  CHECK(column(csv, 2, "status") == "failed");
}

TEST_CASE("a DOT file and a kind with its own N report their real N in names and summary.csv") {
  sgp::testing::TempDir dir("sgp-sweep-own-n");
  std::ofstream(dir / "three.dot") << "digraph t { 0 -> 1; 1 -> 2; 2 -> 0; }\n";
  // The points fail fast on the missing data set: the table is written all the same.
  std::ofstream(dir / "own.toml") << R"(
name = "own"
[grid]
topology = ["three.dot", {kind = "ring", peers = 6}]
peers = [4]
[train]
data_dir = "/nonexistent-sgp-data"
max_iterations = 5
)";
  const auto result =
      run_sgp("sweep " + (dir / "own.toml").string() + " --results " + (dir / "results").string());
  INFO(result.output);
  CHECK(result.exit_code == 3);
  const auto csv = read_csv(dir / "results/own/summary.csv");
  REQUIRE(csv.size() == 3);
  CHECK(column(csv, 1, "point") == "three_n3_auniform_sgp_h1_s0");
  CHECK(column(csv, 1, "peers") == "3");
  CHECK(column(csv, 1, "run_dir") == "three_n3_auniform_sgp_h1_s0");
  CHECK(column(csv, 2, "point") == "ring_n6_auniform_sgp_h1_s0");
  CHECK(column(csv, 2, "peers") == "6");
}

TEST_CASE("a broken sweep file is refused with the key named") {
  sgp::testing::TempDir dir("sgp-sweep-bad");
  std::ofstream(dir / "bad.toml")
      << "name = \"bad\"\n[grid]\npeers = [4]\n[train]\nlr = \"high\"\n";
  const auto result = run_sgp("sweep " + (dir / "bad.toml").string() + " --dry-run");
  CHECK(result.exit_code == 2);
  CHECK(contains(result.output, "bad.toml:5:6: train.lr: expected a number, got \"high\""));
}
