// `sgp simulate` as a user runs it: the run directory holds config.json, simulate.jsonl (a record
// per logged round) and summary.json with the final figures and the measured vs predicted
// contraction; a DOT file works as a generated kind does; --fail / --join are recorded per round
// (live count, sum of w) and in the summary; bad flags are input errors (exit 2) that name the
// flag or item.
#include <cmath>
#include <fstream>
#include <map>
#include <string>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"
#include "support/text.hpp"

using sgp::testing::contains;
using sgp::testing::run_sgp;

namespace {

std::vector<nlohmann::json> records_of(const std::filesystem::path& run) {
  std::vector<nlohmann::json> out;
  std::ifstream in(run / "simulate.jsonl");
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

nlohmann::json summary_of(const std::filesystem::path& run) {
  return nlohmann::json::parse(std::ifstream(run / "summary.json"));
}

}  // namespace

TEST_CASE("sgp simulate: consensus on 16 peers reaches the mean; the run directory is complete") {
  sgp::testing::TempDir dir;
  const auto run = dir / "run";
  const auto r =
      run_sgp("simulate --topology one-peer-exponential --peers 16 --dim 10 --rounds 8 --run-dir " +
              run.string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  for (const char* f : {"config.json", "run.json", "simulate.jsonl", "summary.json"}) {
    CHECK(std::filesystem::exists(run / f));
  }
  const auto records = records_of(run);
  REQUIRE(records.size() == 9);  // the initial state and every round
  CHECK(records.front()["round"] == 0);
  CHECK(records.back()["round"] == 8);
  const auto s = summary_of(run);
  CHECK(s["peers"] == 16);
  CHECK(s["final_mean_error"].get<double>() < 1e-12);
  CHECK(s["final_sum_of_weights"].get<double>() == doctest::Approx(16.0));
  CHECK(s["predicted_consensus_rate"].get<double>() < 1e-9);  // exact after one period
  CHECK(s["measured_contraction_per_period"].get<double>() < 1e-5);
  CHECK(s["peak_rss_bytes"].get<double>() > 0);
  // The same directory again: refused, then --overwrite starts afresh.
  const auto again =
      run_sgp("simulate --topology ring --peers 4 --rounds 3 --run-dir " + run.string());
  CHECK(again.exit_code == 2);
  const auto over = run_sgp("simulate --topology ring --peers 4 --rounds 3 --overwrite --run-dir " +
                            run.string());
  CHECK(over.exit_code == 0);
  CHECK(records_of(run).size() == 4);
}

// Base-2 averages exactly after one period for every N; the one-peer exponential graph only when
// N is a power of two.
TEST_CASE("sgp simulate: Base-2 reaches the mean within one period at N = 25, 100, 1000") {
  sgp::testing::TempDir dir;
  for (int n : {25, 100, 1000}) {
    CAPTURE(n);
    const auto run = dir / ("base-" + std::to_string(n));
    const auto r = run_sgp("simulate --topology base --degree 1 --peers " + std::to_string(n) +
                           " --dim 4 --rounds 1 --no-predict --run-dir " + run.string());
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const int period = summary_of(run)["period"].get<int>();
    // Again for exactly one period (the first run learnt it from the generator).
    const auto again = run_sgp("simulate --topology base --peers " + std::to_string(n) +
                               " --dim 4 --no-predict --overwrite --rounds " +
                               std::to_string(period) + " --run-dir " + run.string());
    REQUIRE(again.exit_code == 0);
    CHECK(period <= 2 * std::log2(n) + 2);
    CHECK(summary_of(run)["final_consensus_error"].get<double>() <= 1e-14);
  }
  const auto one_peer = dir / "one-peer";
  const auto r =
      run_sgp("simulate --topology one-peer-exponential --peers 25 --dim 4 --rounds 5 --run-dir " +
              one_peer.string());
  REQUIRE(r.exit_code == 0);
  CHECK(summary_of(one_peer)["final_consensus_error"].get<double>() > 1e-6);
}

TEST_CASE("sgp simulate: a DOT file, and async least squares under loss logs the optimality gap") {
  sgp::testing::TempDir dir;
  const auto topology = sgp::testing::source_path("topologies/exponential-8.dot");
  const auto run = dir / "file";
  auto r =
      run_sgp("simulate --topology " + topology + " --dim 6 --rounds 20 --run-dir " + run.string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(summary_of(run)["peers"] == 8);
  // Async least squares under these message faults, in `out`.
  const auto under_faults = [&](const std::string& faults, const std::filesystem::path& out) {
    return run_sgp("simulate --topology " + topology + " " + faults +
                   " --workload quadratic --lr 0.05 --dim 6 --rounds 200 --log-every 50 "
                   "--run-dir " +
                   out.string());
  };
  const auto gap_run = dir / "gap";
  r = under_faults("--mode async --drop 0.05 --dup 0.05 --delay 2", gap_run);
  REQUIRE(r.exit_code == 0);
  const auto records = records_of(gap_run);
  REQUIRE(records.size() == 5);
  CHECK(records.back()["optimality_gap"].get<double>() <
        1e-3 * records.front()["optimality_gap"].get<double>());
  const auto s = summary_of(gap_run);
  CHECK(s["messages"]["lost"].get<int>() > 0);
  CHECK(s["messages"]["duplicated"].get<int>() > 0);
  CHECK(s["algo"] == "asgp");  // --mode async is the older name of --algo asgp
  CHECK(s["inject"] == "drop=0.05,dup=0.05,delay=2");
  // --drop, --dup and --delay are the older spellings of --inject's parts: the same run.
  const auto inject_run = dir / "inject";
  r = under_faults("--algo asgp --inject drop=0.05,dup=0.05,delay=2", inject_run);
  REQUIRE(r.exit_code == 0);
  CHECK(summary_of(inject_run)["messages"] == s["messages"]);
  CHECK(summary_of(inject_run)["final_optimality_gap"] == s["final_optimality_gap"]);
}

TEST_CASE("sgp simulate --algo gt and the optimizer flags: in config and summary, printed") {
  sgp::testing::TempDir dir;
  const std::string common =
      "simulate --topology bidirectional-ring --peers 16 --workload quadratic --spread 10 --lr "
      "0.02 --dim 4 --rounds 600 --log-every 100 --run-dir ";
  auto r = run_sgp(common + (dir / "gt").string() + " --algo gt");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.output, "gt: optimum error mean_i ||z_i - theta*||^2 / ||theta*||^2 = "));
  const auto gt = summary_of(dir / "gt");
  CHECK(gt["algo"] == "gt");
  CHECK(gt["final_optimum_error"].get<double>() < 1e-6);
  r = run_sgp(common + (dir / "qg").string() +
              " --momentum 0.5 --momentum-kind quasi-global --global-average-every 8 "
              "--slow-momentum 0.3");
  REQUIRE(r.exit_code == 0);
  const auto qg = summary_of(dir / "qg");
  CHECK(qg["algo"] == "sgp");
  CHECK(qg["momentum"] == 0.5);
  CHECK(qg["momentum_kind"] == "quasi-global");
  CHECK(qg["global_average_every"] == 8);
  CHECK(qg["slow_momentum"] == 0.3);
  CHECK(qg["diverged_at_round"].is_null());
}

TEST_CASE("sgp simulate --fail --join: live count and sum of w per record, who and when") {
  sgp::testing::TempDir dir;
  const auto run = dir / "run";
  const auto r = run_sgp(
      "simulate --topology exponential --peers 8 --dim 4 --rounds 40 --log-every 10 "
      "--fail 3@5,6@5 --join 3@12 --run-dir " +
      run.string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  std::map<int, nlohmann::json> by_round;
  for (const auto& record : records_of(run)) by_round[record["round"].get<int>()] = record;
  // Every 10th round, and the rounds with changes.
  CHECK(by_round.size() == 7);
  CHECK(by_round.at(0)["live"] == 8);
  CHECK(by_round.at(5)["live"] == 6);
  CHECK(by_round.at(5)["sum_of_weights"].get<double>() == 6.0);
  CHECK(by_round.at(12)["live"] == 7);
  CHECK(by_round.at(12)["sum_of_weights"].get<double>() == doctest::Approx(6.0).epsilon(1e-12));
  const auto s = summary_of(run);
  CHECK(s["final_live"] == 7);
  CHECK(s["final_mean_error"].get<double>() < 1e-10);
  CHECK(s["fail"] == nlohmann::json({"3@5", "6@5"}));
  CHECK(s["membership_changes"] ==
        nlohmann::json::parse(R"([{"round": 5, "rank": 3, "event": "failed"},
                                  {"round": 5, "rank": 6, "event": "failed"},
                                  {"round": 12, "rank": 3, "event": "joined", "sponsor": 4}])"));
}

TEST_CASE("sgp simulate: bad flags are input errors naming them") {
  sgp::testing::TempDir dir;
  const std::string run = " --run-dir " + (dir / "run").string();
  struct Case {
    std::string args;
    std::string says;
  };
  for (const auto& c : {
           Case{"simulate --topology moebius --peers 8", "neither a topology kind nor a file"},
           Case{"simulate --topology ring", "needs --peers N"},
           Case{"simulate --topology torus --peers 7", "torus"},
           Case{"simulate --topology ring --peers 8 --drop 0.1",
                "--drop needs an asynchronous algorithm"},
           Case{"simulate --topology ring --peers 8 --inject dup=0.1",
                "--inject needs an asynchronous algorithm"},
           Case{"simulate --topology ring --peers 8 --algo asgp --inject reorder=0.1",
                "--inject: 'reorder=0.1': unknown fault (drop, dup, delay, seed; delays reorder)"},
           Case{"simulate --topology ring --peers 8 --algo asgp --delay 2000",
                "--delay: 'delay=2000': at most 1000 rounds"},
           Case{"simulate --topology ring --peers 8 --lr 0.1", "--lr is for --workload quadratic"},
           Case{"simulate --topology ring --peers 8 --mode lazy", "--mode"},
           Case{"simulate --topology ring --peers 8 --self-weight 1", "--self-weight"},
           Case{"simulate --topology " + sgp::testing::source_path("topologies/exponential-8.dot") +
                    " --peers 5",
                "--peers 5 but"},
           Case{"simulate --topology exponential --peers 5000 --dim 100000000 --mode async", "GiB"},
           Case{"simulate --topology ring --peers 8 --fail 3", "--fail: '3': expected RANK@ROUND"},
           Case{"simulate --topology ring --peers 8 --fail 9@5", "--fail 9@5: rank 9 is not one"},
           Case{"simulate --topology ring --peers 8 --fail 2@5 --join 3@6",
                "--join 3@6: rank 3 is live"},
           Case{"simulate --topology ring --peers 8 --rounds 50 --join 3@60",
                "--join 3@60: round 60"},
           Case{"simulate --topology ring --peers 8 --algo gt", "--algo gt is for --workload"},
           Case{"simulate --topology ring --peers 8 --algo fancy", "--algo"},
           Case{"simulate --topology ring --peers 8 --algo gt --mode async",
                "--mode async contradicts --algo gt"},
           Case{"simulate --topology ring --peers 8 --workload quadratic --momentum-kind "
                "quasi-global",
                "--momentum-kind quasi-global needs --momentum"},
           Case{"simulate --topology ring --peers 8 --workload quadratic --algo agt --momentum 0.9",
                "--momentum with --algo agt"},
           Case{"simulate --topology ring --peers 8 --workload quadratic --slow-momentum 0.5",
                "--slow-momentum needs --global-average-every"},
           Case{"simulate --topology ring --peers 8 --workload quadratic --algo asgp "
                "--global-average-every 4",
                "--global-average-every with --algo asgp"},
           Case{"simulate --topology ring --peers 8 --workload quadratic --algo gt --fail 1@3",
                "--algo gt with --fail / --join"},
           Case{"simulate --topology ring --peers 8 --workload quadratic --lr 0 --momentum 0.5 "
                "--momentum-kind quasi-global",
                "needs --lr > 0"},
       }) {
    CAPTURE(c.args);
    const auto r = run_sgp(c.args + run);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.output, c.says));
  }
}

TEST_CASE(
    "sgp simulate --compress: payload bytes in every record and the summary; misuse refused") {
  sgp::testing::TempDir dir;
  const std::string common = "simulate --topology ring --peers 4 --dim 100 --rounds 5 --run-dir ";
  const auto compressed = dir / "topk";
  auto r = run_sgp(common + compressed.string() + " --compress topk:0.05 --consensus-step 0.5");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  // 5 of 100 values: header 5 + count 4 + values 20 + 5 one-byte index gaps, to 1 peer each.
  const auto records = records_of(compressed);
  REQUIRE(records.size() == 6);
  CHECK(records[0]["bytes_sent"] == 0);
  CHECK(records[1]["bytes_sent"] == 4 * 34);
  CHECK(records[5]["total_bytes_sent"] == 5 * 4 * 34);
  auto s = summary_of(compressed);
  CHECK(s["compress"] == "topk:0.05");
  CHECK(s["consensus_step"] == 0.5);
  CHECK(s["bytes_per_round"] == 4 * 34);
  CHECK(s["final_sum_of_weights"].get<double>() == doctest::Approx(4.0).epsilon(1e-12));
  CHECK(contains(r.output, "payload bytes sent: 136 per round"));

  const auto plain = dir / "plain";
  r = run_sgp(common + plain.string());
  REQUIRE(r.exit_code == 0);
  CHECK(summary_of(plain)["bytes_per_round"] == 4 * 100 * 4);  // float32 rows, one edge each

  for (const auto& bad : std::map<std::string, std::string>{
           {"--compress sign --algo asgp", "--compress sign with --algo asgp"},
           {"--compress sign --workload quadratic", "--workload consensus only"},
           {"--compress qsgd:0", "--compress qsgd:0"},
           {"--consensus-step 0.5", "--consensus-step is for compressed gossip"},
           {"--compress sign --consensus-step 0",
            "--consensus-step: expected a number in (0, 1]"}}) {
    const std::string& flags = bad.first;
    const std::string& named = bad.second;
    r = run_sgp(common + (dir / "bad").string() + " " + flags);
    INFO(flags, r.output);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.output, named));
  }
}
