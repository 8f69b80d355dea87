// `sgp sweep` over simulations (command = "simulate"): a 4-point grid runs sgp simulate per
// point in seconds, writes summary.csv with the simulations' figures, resumes, and plots.
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"
#include "support/text.hpp"

using sgp::testing::contains;
using sgp::testing::run_sgp;

namespace {

// Rows of name -> value (the values here hold no commas).
std::vector<std::map<std::string, std::string>> read_rows(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<std::vector<std::string>> cells;
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> fields;
    std::stringstream s(line + ",");
    for (std::string field; std::getline(s, field, ',');) fields.push_back(field);
    cells.push_back(fields);
  }
  std::vector<std::map<std::string, std::string>> rows;
  for (std::size_t r = 1; r < cells.size(); ++r) {
    std::map<std::string, std::string> row;
    for (std::size_t c = 0; c < cells[0].size(); ++c) row[cells[0][c]] = cells[r].at(c);
    rows.push_back(row);
  }
  return rows;
}

}  // namespace

TEST_CASE("a simulate sweep runs sgp simulate per point, writes summary.csv, resumes, plots") {
  sgp::testing::TempDir dir("sgp-sweep-simulate");
  std::ofstream(dir / "sim.toml") << R"(
name = "sim"
command = "simulate"
[grid]
topology = ["ring", "exponential"]
peers = [8]
drop = [0.0, 0.1]
[simulate]
mode = "async"
dim = 4
rounds = 300
fail = "2@10"
threads = 1
)";
  const std::string command =
      "sweep " + (dir / "sim.toml").string() + " --results " + (dir / "results").string();
  const auto result = run_sgp(command);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  const auto rows = read_rows(dir / "results/sim/summary.csv");
  REQUIRE(rows.size() == 4);
  CHECK(rows[0].at("point") == "ring_n8_drop-0.0");
  CHECK(rows[3].at("point") == "exponential_n8_drop-0.1");
  for (const auto& row : rows) {
    CAPTURE(row.at("point"));
    CHECK(row.at("status") == "finished");
    CHECK(row.at("final_live") == "7");
    CHECK(std::stod(row.at("final_mean_error")) < 1e-12);  // the survivors' mean at round 10
    CHECK(!row.at("predicted_consensus_rate").empty());
    CHECK((row.at("drop") == "0.0") == (row.at("messages_lost") == "0"));
  }
  const auto point = dir / "results/sim/exponential_n8_drop-0.1";
  const auto config = nlohmann::json::parse(std::ifstream(point / "config.json"));
  CHECK(config["command"] == "simulate");
  CHECK(config["inject"] == "drop=0.1");  // the sweep's drop = 0.1, in --inject's syntax
  CHECK(config["fail"] == nlohmann::json({"2@10"}));
  CHECK(std::filesystem::exists(point / "simulate.log"));
  // Again: every point is already finished.
  const auto again = run_sgp(command);
  CHECK(again.exit_code == 0);
  CHECK(contains(again.output, "4 already finished, 0 to run"));
  // scripts/plot draws every point's records.
  const auto plot =
      sgp::testing::run_command("/usr/bin/python3 " + sgp::testing::source_path("scripts/plot") +
                                " " + (dir / "results/sim").string());
  INFO(plot.output);
  CHECK(plot.exit_code == 0);
  CHECK(std::filesystem::file_size(dir / "results/sim/plots/simulate.png") > 1000);
}
