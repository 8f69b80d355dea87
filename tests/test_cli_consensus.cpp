// `sgp consensus --local`: N real peer processes over ZeroMQ on 127.0.0.1 (ports picked from the
// OS by this test), sync and overlap, reach the exact mean; a peer that cannot start is reported
// with its rank and its own error; bad flags are clear input errors.

#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "support/local_topology.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"
#include "support/text.hpp"

using sgp::testing::contains;
using sgp::testing::run_sgp;

namespace {

// For `sgp consensus --local`, which picks the ports (the tests that start peers by hand write
// free ports with write_local_topology).
std::filesystem::path write_topology(const sgp::testing::TempDir& dir, int n) {
  return sgp::testing::write_launch_topology(dir / "topology.dot", "one-peer-exponential", n);
}

}  // namespace

TEST_CASE("sgp consensus --local: 4 and 8 processes reach the exact mean, sync and overlap") {
  for (int n : {4, 8}) {
    for (const char* mode : {"sync", "overlap"}) {
      CAPTURE(n);
      CAPTURE(mode);
      sgp::testing::TempDir dir;
      const auto topology = write_topology(dir, n);
      // One-peer exponential with N = 2^d is exact after d rounds (up to float rounding) in sync
      // mode; overlap mixes with up to one round of lag and gets more rounds.
      const int rounds = std::string(mode) == "sync" ? 12 : 80;
      const auto run = dir / "run";
      const auto r = run_sgp("consensus --local --topology " + topology.string() + " --rounds " +
                             std::to_string(rounds) + " --mode " + mode +
                             " --dim 50000 --timeout-ms 20000 --run-dir " + run.string());
      INFO(r.output);
      REQUIRE(r.exit_code == 0);
      const auto summary = nlohmann::json::parse(std::ifstream(run / "summary.json"));
      CHECK(summary["round"] == rounds);
      CHECK(summary["consensus_error"].get<double>() <= 1e-12);
      // Authenticated with per-run passwords, which are gone with the run.
      CHECK(r.output.find("per-run credentials") != std::string::npos);
      CHECK_FALSE(std::filesystem::exists(run / ".credentials"));
      for (int rank = 0; rank < n; ++rank) {
        std::ifstream in(run / ("peer-" + std::to_string(rank) + ".jsonl"));
        std::string line, last;
        int records = 0;
        while (std::getline(in, line)) {
          last = line;
          ++records;
        }
        CHECK(records == rounds + 1);  // every round, then the final state
        const auto final = nlohmann::json::parse(last);
        CHECK(final["distance_to_mean"].get<double>() <= 1e-6);
        CHECK(final["rejected"] == 0);
      }
      std::ifstream per_round(run / "consensus.jsonl");
      int lines = 0;
      for (std::string line; std::getline(per_round, line);) ++lines;
      CHECK(lines == rounds);
    }
  }
}

// --compress topk:R | sign (compressed differences to public copies, wire dtype 7): real
// processes reach the exact mean, conserve the weights, and every record's bytes_sent is what
// went on the wire: each round one message (80-byte header + payload) to each of the 2
// out-neighbours of the period. topk:0.25 of 64 values: 16 values and 16 one-byte index gaps
// after kind, n and k (89 bytes); sign: kind, n, a scale and 8 bytes of bits (17 bytes).
namespace {

// The last record (after finish()) of rank `rank`'s peer log in `run`.
nlohmann::json final_record(const std::filesystem::path& run, int rank) {
  std::ifstream in(run / ("peer-" + std::to_string(rank) + ".jsonl"));
  std::string line, last;
  while (std::getline(in, line)) last = line;
  return nlohmann::json::parse(last);
}

}  // namespace

// The local fast path (shared-memory rings): the exact mean as over ZeroMQ, every payload byte
// through shared memory, none with --no-local-fast-path (mixed edges: tests/test_shm_ring.cpp).
TEST_CASE("sgp consensus --local: the local fast path carries the payloads, exact mean") {
  constexpr int n = 4, rounds = 12, dim = 50000;
  for (const std::string variant : {"all local", "--no-local-fast-path"}) {
    CAPTURE(variant);
    sgp::testing::TempDir dir;
    const auto topology = write_topology(dir, n);
    const auto run = dir / "run";
    const auto r = run_sgp("consensus --local --topology " + topology.string() + " --rounds " +
                           std::to_string(rounds) + " --dim " + std::to_string(dim) +
                           " --timeout-ms 20000 --run-dir " + run.string() +
                           (variant == "--no-local-fast-path" ? " --no-local-fast-path" : ""));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const auto summary = nlohmann::json::parse(std::ifstream(run / "summary.json"));
    CHECK(summary["consensus_error"].get<double>() <= 1e-12);
    // One message of dim floats per peer and round (one-peer exponential, one chunk).
    const std::uint64_t all = std::uint64_t{n} * rounds * dim * sizeof(float);
    const auto shm_bytes = summary["shm_bytes"].get<std::uint64_t>();
    if (variant == "all local") CHECK(shm_bytes == all);
    if (variant == "--no-local-fast-path") CHECK(shm_bytes == 0);
    for (int rank = 0; rank < n; ++rank) {
      const auto final = final_record(run, rank);
      CHECK(final["rejected"] == 0);
      CHECK(final["shm_refused"] == 0);
    }
  }
}

TEST_CASE("sgp consensus --compress topk, sign: 4 processes reach the exact mean, bytes as sent") {
  struct Case {
    const char* compress;
    const char* mode;
    const char* step;
    int rounds;
    int payload_bytes;
  };
  for (auto c : {Case{"topk:0.25", "sync", "0", 400, 89}, Case{"sign", "sync", "0.1", 2000, 17}}) {
    CAPTURE(c.compress);
    sgp::testing::TempDir dir;
    const auto topology = write_topology(dir, 4);
    const auto run = dir / "run";
    const auto r = run_sgp("consensus --local --topology " + topology.string() + " --rounds " +
                           std::to_string(c.rounds) + " --mode " + c.mode + " --compress " +
                           c.compress + " --consensus-step " + c.step +
                           " --dim 64 --timeout-ms 20000 --run-dir " + run.string());
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const auto summary = nlohmann::json::parse(std::ifstream(run / "summary.json"));
    CHECK(summary["final_max_distance_to_mean"].get<double>() <= 1e-6);
    double weights = 0;
    for (int rank = 0; rank < 4; ++rank) {
      std::ifstream in(run / ("peer-" + std::to_string(rank) + ".jsonl"));
      std::string line, last;
      while (std::getline(in, line)) last = line;
      const auto final = nlohmann::json::parse(last);
      CHECK(final["rejected"] == 0);
      CHECK(final["bytes_sent"] == std::uint64_t(c.rounds) * 2 * (80 + c.payload_bytes));
      weights += final["weight"].get<double>();
    }
    CHECK(weights == doctest::Approx(4.0).epsilon(1e-12));
  }
}

// Base-2 on 6 peers averages exactly after one period (4 rounds); the one-peer exponential graph
// on 6 peers does not, in the same rounds.
TEST_CASE("sgp consensus --local: 6 processes on Base-2 reach the exact mean after one period") {
  for (const char* kind : {"base", "one-peer-exponential"}) {
    CAPTURE(kind);
    sgp::testing::TempDir dir;
    const auto topology = sgp::testing::write_launch_topology(dir / "topology.dot", kind, 6);
    const auto run = dir / "run";
    const auto r = run_sgp("consensus --local --topology " + topology.string() +
                           " --rounds 4 --dim 1000 --timeout-ms 20000 --run-dir " + run.string());
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const auto summary = nlohmann::json::parse(std::ifstream(run / "summary.json"));
    CHECK(summary["round"] == 4);
    if (std::string(kind) == "base")
      CHECK(summary["consensus_error"].get<double>() <= 1e-12);
    else
      CHECK(summary["consensus_error"].get<double>() > 1e-6);
  }
}

// Real processes are never paced alike: here rank 3 starts half a second after the others,
// under dropped, duplicated and reordered messages. Ranks 0, 1, 2 and 6 (none of whose
// in-neighbours waits for rank 3 in their first round) run ahead of their in-neighbours; they
// used to restart from z with w = 1, which changed the total mass, and ended 8e-3 from the
// mean. Running sums and holding mass instead make it exact.
TEST_CASE("sgp consensus --algo asgp: processes started apart reach the exact mean under faults") {
  const int n = 8;
  sgp::testing::TempDir dir;
  const auto topology = sgp::testing::write_local_topology(dir / "t.dot", "exponential", n);
  const auto run = dir / "run";
  std::vector<pid_t> peers;
  const int late = 3;
  for (int k = 0; k < n; ++k) {
    const int rank = k < late ? k : k == n - 1 ? late : k + 1;
    if (rank == late) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    peers.push_back(sgp::testing::start_sgp(
        "consensus --algo asgp --rounds 150 --dim 1000 --timeout-ms 20000 --rank " +
            std::to_string(rank) + " --topology " + topology.string() + " --run-dir " +
            run.string() + " --inject drop=0.05,dup=0.01,reorder=0.05,seed=" + std::to_string(rank),
        dir / ("log-" + std::to_string(rank))));
  }
  for (pid_t pid : peers) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  for (int rank = 0; rank < n; ++rank) {
    CAPTURE(rank);
    std::ifstream in(run / ("peer-" + std::to_string(rank) + ".jsonl"));
    std::string line, last;
    while (std::getline(in, line)) last = line;
    REQUIRE(!last.empty());
    const auto final = nlohmann::json::parse(last);
    CHECK(final["distance_to_mean"].get<double>() <= 1e-9);
  }
}

TEST_CASE("sgp consensus --local: a peer that cannot start is named with its own error") {
  sgp::testing::TempDir dir;
  // 192.0.2.1 (TEST-NET-1) is no address of this host: rank 3 cannot bind.
  const auto topology = sgp::testing::write_local_topology(
      dir / "topology.dot", "one-peer-exponential", 4, "tcp://192.0.2.1:5600");
  const auto r = run_sgp("consensus --local --insecure --topology " + topology.string() +
                         " --rounds 5 --timeout-ms 3000 --run-dir " + (dir / "run").string());
  CHECK(r.exit_code == 3);
  CHECK(contains(r.output, "rank 3 exited with code 3"));
  CHECK(contains(r.output, "cannot bind the receive socket at 'tcp://192.0.2.1:5600'"));
}

TEST_CASE("sgp consensus --rank: the others fail naming the peer that never started") {
  sgp::testing::TempDir dir;
  const auto topology =
      sgp::testing::write_local_topology(dir / "topology.dot", "one-peer-exponential", 4);
  // Only rank 0 runs; rank 3 pushes to it in round 0 and never comes.
  const auto r = run_sgp("consensus --rank 0 --topology " + topology.string() +
                         " --rounds 3 --timeout-ms 500 --run-dir " + (dir / "run").string());
  CHECK(r.exit_code == 3);
  CHECK(contains(r.output, "no message from rank 3 for gossip round 0 within 500 ms"));
}

TEST_CASE("sgp consensus: bad flags and files are input errors naming them") {
  sgp::testing::TempDir dir;
  const auto topology = write_topology(dir, 4);
  SUBCASE("neither --local nor --rank") {
    const auto r = run_sgp("consensus --topology " + topology.string());
    CHECK(r.exit_code == 2);
    CHECK(contains(r.output, "exactly one of --local"));
  }
  SUBCASE("rank out of range") {
    const auto r = run_sgp("consensus --rank 4 --topology " + topology.string());
    CHECK(r.exit_code == 2);
    CHECK(contains(r.output, "--rank 4"));
  }
  SUBCASE("bad mode") {
    const auto r = run_sgp("consensus --local --mode asynchronous --topology " + topology.string() +
                           " --run-dir " + (dir / "run").string());
    CHECK(r.exit_code == 2);
    CHECK(contains(r.output, "--mode: 'asynchronous'"));
  }
  SUBCASE("--algo takes the algorithm table's names; --mode, the older name, must agree") {
    for (const auto& bad : std::map<std::string, std::string>{
             {"--algo sgd", "--algo: 'sgd' is not one of sgp, osgp"},
             {"--algo dpsgd", "--algo dpsgd: sgp consensus runs sgp, osgp, asgp, allreduce"},
             {"--algo osgp --mode async", "--mode async contradicts --algo osgp"},
             {"--mode async --compress fp16", "--compress fp16: asgp does not send push-sum"},
             {"--algo allreduce --compress bf16", "--compress bf16: allreduce does not send"},
             {"--compress fp16 --device auto",
              "payloads are compressed on the CPU backend only"}}) {
      const std::string& flags = bad.first;
      const std::string& says = bad.second;
      const auto r = run_sgp("consensus --local " + flags + " --topology " + topology.string() +
                             " --run-dir " + (dir / "run").string());
      INFO(flags, r.output);
      CHECK(r.exit_code == 2);
      CHECK(contains(r.output, says));
    }
  }
  SUBCASE("a topology that is not strongly connected (rank 2 pushes to nobody)") {
    const auto path = dir / "chain.dot";
    std::ofstream(path) << "digraph t {\n"
                           "  0 [endpoint=\"tcp://127.0.0.1:1\"];\n"
                           "  1 [endpoint=\"tcp://127.0.0.1:2\"];\n"
                           "  2 [endpoint=\"tcp://127.0.0.1:3\"];\n"
                           "  0 -> 1; 1 -> 2; 2 -> 1;\n}\n";
    for (const char* how : {"consensus --rank 0", "peer --rank 0 --device cpu"}) {
      CAPTURE(how);
      const auto r = run_sgp(std::string(how) + " --topology " + path.string() + " --run-dir " +
                             (dir / "run").string());
      CHECK(r.exit_code == 2);
      CHECK(contains(r.output,
                     "chain.dot: the topology is not strongly connected (2 strongly "
                     "connected components"));
    }
  }
  SUBCASE("missing topology file") {
    const auto r = run_sgp("consensus --local --topology " + (dir / "nope.dot").string());
    CHECK(r.exit_code == 2);
    CHECK(contains(r.output, "nope.dot"));
  }
}

namespace {

std::string short_consensus(const std::filesystem::path& topology) {
  return "consensus --local --topology " + topology.string() +
         " --rounds 4 --dim 100 --timeout-ms 20000";
}

int records_in(const std::filesystem::path& jsonl) {
  std::ifstream in(jsonl);
  int records = 0;
  for (std::string line; std::getline(in, line);) ++records;
  return records;
}

}  // namespace

TEST_CASE("two runs started in the same second get their own default run directories") {
  sgp::testing::TempDir dir;
  const auto sgp = std::filesystem::absolute(sgp::testing::sgp_binary()).string();
  std::vector<pid_t> runs;
  for (int i = 0; i < 2; ++i) {
    const auto topology = sgp::testing::write_launch_topology(
        dir / ("t" + std::to_string(i) + ".dot"), "one-peer-exponential", 4);
    runs.push_back(sgp::testing::start_command(
        "cd " + dir.path().string() + " && exec " + sgp + " " + short_consensus(topology),
        dir / ("run" + std::to_string(i) + ".log")));
  }
  for (int i = 0; i < 2; ++i) {
    int status = 0;
    ::waitpid(runs[i], &status, 0);
    INFO(sgp::testing::slurp(dir / ("run" + std::to_string(i) + ".log")));
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  }
  int directories = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir / "runs")) {
    CHECK(records_in(entry.path() / "peer-0.jsonl") == 5);
    ++directories;
  }
  CHECK(directories == 2);
}

TEST_CASE("a run refuses another run's directory unless --overwrite, which starts it afresh") {
  sgp::testing::TempDir dir;
  const auto topology = write_topology(dir, 4);
  const std::string run = short_consensus(topology) + " --run-dir " + (dir / "run").string();
  REQUIRE(run_sgp(run).exit_code == 0);
  std::ofstream(dir / "run" / "notes.txt") << "the user's, not sgp's";
  const auto again = run_sgp(run);
  INFO(again.output);
  CHECK(again.exit_code == 2);
  CHECK(contains(again.output, "run directory " + (dir / "run").string() +
                                   " holds another run's results (config.json"));
  CHECK(contains(again.output, "give --overwrite to delete them first, or another --run-dir"));
  CHECK(records_in(dir / "run" / "peer-0.jsonl") == 5);

  const auto overwritten = run_sgp(run + " --overwrite");
  INFO(overwritten.output);
  CHECK(overwritten.exit_code == 0);
  CHECK(records_in(dir / "run" / "peer-0.jsonl") == 5);  // not appended to the first run's
  CHECK(std::filesystem::exists(dir / "run" / "notes.txt"));
}
