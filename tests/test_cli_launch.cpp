// `sgp launch` / `sgp peer`: real peer processes over ZeroMQ on 127.0.0.1 (ports from the OS),
// training on the real Fashion-MNIST data, as a user runs them.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sgp/log.hpp"
#include "sgp/topology/analysis.hpp"
#include "sgp/topology/dot_file.hpp"
#include "support/json_files.hpp"
#include "support/local_topology.hpp"
#include "support/skip.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"
#include "support/text.hpp"

using nlohmann::json;
using sgp::testing::contains;
using sgp::testing::processes_mentioning;
using sgp::testing::read_json;
using sgp::testing::read_jsonl;
using sgp::testing::run_sgp;
using sgp::testing::slurp;
using sgp::testing::start_sgp;

namespace {

// A short run's flags: few iterations, frequent evaluations and records.
std::string short_run(const std::filesystem::path& topology, const std::filesystem::path& run,
                      int iterations, int timeout_ms = 20000) {
  return "launch --device cpu --topology " + topology.string() + " --run-dir " + run.string() +
         " --max-iterations " + std::to_string(iterations) +
         " --eval-every 0.1 --log-every 10 --timeout-ms " + std::to_string(timeout_ms);
}

// 4 W1 peers of one host that pushed once per iteration: the payloads went through shared memory
// by default (the star test below runs with --no-local-fast-path), only headers and the rings'
// descriptors over ZeroMQ, unless a ring was full when a peer ran ahead.
void check_through_shared_memory(const std::filesystem::path& run, const json& summary,
                                 std::int64_t iterations) {
  CHECK(summary["shm_bytes"].get<std::int64_t>() > 0);
  CHECK(summary["shm_refused"] == 0);
  for (int rank = 0; rank < 4; ++rank) {
    CAPTURE(rank);
    const auto peer = read_json(run / ("peer-" + std::to_string(rank) + "-summary.json"));
    const auto shm = peer["shm_bytes"].get<std::int64_t>();
    CHECK(shm > 0);
    CHECK(shm <= iterations * 669706 * 4);
    CHECK(shm + peer["zmq_bytes"].get<std::int64_t>() >=
          iterations * sgp::topology::message_bytes(669706));
  }
}

// The topology's port 0: the launch picked a port per rank, wrote it into the topology the peers
// read, and each peer listens on its own.
void check_picked_ports(const std::filesystem::path& run, const sgp::topology::Schedule& mixed) {
  const auto picked = sgp::topology::read_dot_file(run / "topology-readdressed.dot");
  CHECK(mixed.endpoints() == picked.endpoints());
  for (int r = 0; r < picked.num_peers(); ++r) {
    CHECK(picked.endpoint(r) != "tcp://127.0.0.1:0");
    CHECK(contains(slurp(run / ("peer-" + std::to_string(r) + ".log")),
                   "bound " + picked.endpoint(r) + ";"));
  }
}

}  // namespace

TEST_CASE("4 SGP peers over ZeroMQ: loss falls, consensus is reported, mass is conserved") {
  SGP_SKIP_WITHOUT_FASHION_MNIST();
  sgp::testing::TempDir dir;
  const auto topology =
      sgp::testing::write_launch_topology(dir / "t.dot", "one-peer-exponential", 4);
  const auto run = dir / "run";
  const auto r = run_sgp(short_run(topology, run, 100));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);

  const auto summary = read_json(run / "summary.json");
  CHECK(summary["peers"] == 4);
  CHECK(summary["iterations"] == 100);
  // The run directory holds the topology as mixed, and config.json the weights kept: uniform
  // over out-degree 1 + 1 on the one-peer exponential graph.
  CHECK(read_json(run / "config.json")["mixing_self_weights"] == json::array({0.5}));
  const auto mixed = sgp::topology::read_dot_file(run / "mixing.dot");
  CHECK(mixed.num_peers() == 4);
  CHECK(mixed.period() == 2);
  CHECK(mixed.self_weight(3, 1) == 0.5);
  check_picked_ports(run, mixed);
  CHECK(summary["sum_of_weights"].get<double>() == doctest::Approx(4.0).epsilon(1e-12));
  REQUIRE(summary.contains("final_consensus_error"));
  // Two rounds of this graph average 4 peers exactly: ~1e-14 (local-only peers: ~1e-2).
  CHECK(summary["final_consensus_error"].get<double>() < 1e-8);
  CHECK(summary["final_average_model_accuracy"].get<double>() > 0.5);
  // One push per iteration on this graph: the W1 vector in chunks, each with its header.
  CHECK(summary["bytes_sent_per_iteration"].get<double>() ==
        doctest::Approx(static_cast<double>(sgp::topology::message_bytes(669706))));
  check_through_shared_memory(run, summary, 100);
  for (int rank = 0; rank < 4; ++rank) {
    const auto records = read_jsonl(run / ("peer-" + std::to_string(rank) + ".jsonl"));
    REQUIRE(records.size() >= 5);
    CHECK(records.back()["loss"].get<double>() < records.front()["loss"].get<double>());
    for (const char* key : {"weight", "bytes_sent", "wait_s", "communication_s", "compute_s"}) {
      CHECK(records.back().contains(key));
    }
    // Log lines carry the date and the host with the rank (runs on several hosts).
    const std::string log = slurp(run / ("peer-" + std::to_string(rank) + ".log"));
    CHECK(contains(log, " [" + sgp::short_host_name() + " rank " + std::to_string(rank) + "] "));
    CHECK(log.starts_with("[20"));
  }
  // The trained models are outputs: each peer's z and the average; sgp eval tests them exactly
  // as the run did, and the Python reader reads them.
  const auto average = run_sgp("eval " + (run / "model-average.bin").string());
  INFO(average.output);
  CHECK(average.exit_code == 0);
  CHECK(contains(average.output,
                 fmt::format("model mlp:512,512, 669706 parameters: test accuracy {:.2f}%",
                             100.0 * summary["final_average_model_accuracy"].get<double>())));
  const auto peer = run_sgp("eval " + (run / "peer-2-model.bin").string());
  CHECK(contains(
      peer.output,
      fmt::format(
          "test accuracy {:.2f}%",
          100.0 * read_json(run / "peer-2-summary.json")["final_test_accuracy"].get<double>())));
  if (const char* source = std::getenv("SGP_SOURCE_DIR")) {
    const auto python = sgp::testing::run_command(
        "python3 " + (std::filesystem::path(source) / "scripts" / "sgp_model.py").string() + " " +
        (run / "peer-2-model.bin").string());
    CHECK(contains(python.output, "model mlp:512,512, 669706 parameters"));
  }
  std::filesystem::resize_file(run / "peer-2-model.bin", 1000);
  const auto damaged = run_sgp("eval " + (run / "peer-2-model.bin").string());
  CHECK(damaged.exit_code == 2);
  CHECK(contains(damaged.output, "peer-2-model.bin: not an sgp model file: damaged"));
  const auto monitor = read_jsonl(run / "monitor.jsonl");
  REQUIRE(!monitor.empty());
  CHECK(monitor.back()["iteration"] == 100);

  // `sgp summarize` (for peers another launcher started) merges the same summary.json.
  std::filesystem::remove(run / "summary.json");
  const auto merged = run_sgp("summarize " + run.string());
  INFO(merged.output);
  CHECK(merged.exit_code == 0);
  CHECK(read_json(run / "summary.json") == summary);
}

TEST_CASE("allreduce over ZeroMQ: every peer ends each round with the same model, 2(N-1)/N sent") {
  SGP_SKIP_WITHOUT_FASHION_MNIST();
  sgp::testing::TempDir dir;
  // 3 peers: W1's 669706 parameters split into segments of 223235, 223235 and 223236. The ring
  // of the file is not what allreduce uses (it takes ranks 0 -> 1 -> 2 -> 0 from the endpoints),
  // so a star, which has no edge 1 -> 2, must work as well.
  const auto topology = sgp::testing::write_launch_topology(dir / "t.dot", "star", 3);
  const auto run = dir / "run";
  const auto r = run_sgp(short_run(topology, run, 30) + " --algo allreduce");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto summary = read_json(run / "summary.json");
  CHECK(summary["algo"] == "allreduce");
  CHECK(summary["sum_of_weights"].get<double>() == 3.0);
  // Every peer holds the same bits: the monitor's consensus error is exactly zero and every
  // peer's test accuracy is the same.
  CHECK(summary["final_consensus_error"].get<double>() == 0.0);
  CHECK(summary["min_peer_accuracy"] == summary["max_peer_accuracy"]);
  const std::int64_t p = 669706, segment[3] = {223235, 223235, 223236};
  for (int rank = 0; rank < 3; ++rank) {
    const auto peer = read_json(run / ("peer-" + std::to_string(rank) + "-summary.json"));
    // Reduce-scatter sends every segment but (rank + 1)'s, all-gather every one but (rank + 2)'s,
    // one message each (a segment fits one chunk).
    const std::int64_t floats = 2 * p - segment[(rank + 1) % 3] - segment[(rank + 2) % 3];
    CHECK(peer["bytes_sent_per_iteration"].get<double>() ==
          static_cast<double>(4 * floats + 4 * 80));
  }
}

TEST_CASE("--global-average-every 1 over ZeroMQ ends with allreduce's models, bit for bit") {
  SGP_SKIP_WITHOUT_FASHION_MNIST();
  sgp::testing::TempDir dir;
  // A directed ring 0 -> 1 -> 2 -> 0 besides the ring allreduce's links: the star has no edge
  // 1 -> 2, so the exact rounds need the links the transport adds for them.
  const auto topology = sgp::testing::write_launch_topology(dir / "t.dot", "star", 3);
  const auto allreduce = run_sgp(short_run(topology, dir / "allreduce", 20) + " --algo allreduce");
  INFO(allreduce.output);
  REQUIRE(allreduce.exit_code == 0);
  const auto pga =
      run_sgp(short_run(topology, dir / "pga", 20) + " --algo sgp --global-average-every 1");
  INFO(pga.output);
  REQUIRE(pga.exit_code == 0);
  CHECK(read_json(dir / "pga" / "config.json")["global_average_every"] == 1);
  CHECK(read_json(dir / "pga" / "summary.json")["update_rule"] == "PGA H=1");
  for (int rank = 0; rank < 3; ++rank) {
    const std::string model = "peer-" + std::to_string(rank) + "-model.bin";
    CHECK(slurp(dir / "pga" / model) == slurp(dir / "allreduce" / model));
  }
}

TEST_CASE("--compress fp16 over ZeroMQ: half the payload bytes, mass conserved, loss falls") {
  SGP_SKIP_WITHOUT_FASHION_MNIST();
  sgp::testing::TempDir dir;
  const auto topology = sgp::testing::write_launch_topology(dir / "t.dot", "ring", 3);
  const auto run = dir / "run";
  const auto r = run_sgp(short_run(topology, run, 30) + " --compress fp16");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto summary = read_json(run / "summary.json");
  CHECK(summary["sum_of_weights"].get<double>() == doctest::Approx(3.0).epsilon(1e-12));
  // One push per iteration: W1's 669706 parameters as 2-byte values in 3 chunks, 80-byte headers.
  CHECK(summary["bytes_sent_per_iteration"].get<double>() == 2.0 * 669706 + 3 * 80);
  CHECK(read_json(run / "config.json")["compress"] == "fp16");
  const auto records = read_jsonl(run / "peer-0.jsonl");
  REQUIRE(records.size() >= 2);
  CHECK(records.back()["loss"].get<double>() < records.front()["loss"].get<double>());
}

TEST_CASE("--no-final-eval: no peer evaluates its final model; the monitor's average model is") {
  SGP_SKIP_WITHOUT_FASHION_MNIST();
  sgp::testing::TempDir dir;
  const auto topology = sgp::testing::write_launch_topology(dir / "t.dot", "ring", 3);
  const auto run = dir / "run";
  const auto r = run_sgp(short_run(topology, run, 20) + " --no-final-eval");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_FALSE(contains(r.output, "finished without evaluating"));
  const auto summary = read_json(run / "summary.json");
  CHECK(summary["final_average_model_accuracy"].get<double>() > 0.1);
  CHECK_FALSE(summary.contains("unevaluated_peers"));
  for (int rank = 0; rank < 3; ++rank) {
    CAPTURE(rank);
    const auto peer = read_json(run / ("peer-" + std::to_string(rank) + "-summary.json"));
    CHECK_FALSE(peer.contains("final_test_accuracy"));
    CHECK(peer["final_eval"] == false);
    const auto records = read_jsonl(run / ("peer-" + std::to_string(rank) + ".jsonl"));
    REQUIRE_FALSE(records.empty());
    CHECK_FALSE(records.back().contains("test_accuracy"));  // the last row: training only
  }
}

TEST_CASE("a sign-flipping insider is named in summary.json and the launch does not exit 0") {
  SGP_SKIP_WITHOUT_FASHION_MNIST();
  sgp::testing::TempDir dir;
  // Ranks 0 and 1 hear rank 3 and one honest in-neighbour each, in the same (only) phase of the
  // static exponential graph: NeighbourWatch compares neighbours within a phase.
  const auto topology = sgp::testing::write_launch_topology(dir / "t.dot", "exponential", 4);
  const auto run = dir / "run";
  const auto r = run_sgp(short_run(topology, run, 20) + " --sign-flip-rank 3");
  INFO(r.output);
  CHECK(r.exit_code == 3);
  CHECK(contains(r.output, "without --robust clip their contributions were mixed in unchanged"));
  // Rank 1 names rank 3. Rank 0, whose model rank 3 zeroes in round 0, may not within 20
  // iterations (everyone is then far from it), and rank 2 may name rank 0, which relays the
  // poison: every entry must hold its evidence.
  const auto summary = read_json(run / "summary.json");
  std::set<int> reporters_of_3;
  for (const auto& s : summary["suspected_peers"]) {
    CHECK(s["robust"] == "none");
    CHECK(s["distance"].get<double>() > 4 * s["reference"].get<double>());
    if (s["rank"] == 3) reporters_of_3.insert(s["reported_by"].get<int>());
  }
  CHECK(reporters_of_3.contains(1));
  CHECK(contains(slurp(run / "peer-1.log"), "in-neighbour 3 is suspected"));
}

TEST_CASE("launch --prepare-only writes config.json and starts nothing; summarize needs one") {
  sgp::testing::TempDir dir;
  const auto topology = sgp::testing::write_local_topology(dir / "t.dot", "ring", 3);
  const auto run = dir / "run";
  auto r = run_sgp("launch --prepare-only --epochs 0.5 --topology " + topology.string() +
                   " --run-dir " + run.string() + " --monitor tcp://127.0.0.1:1");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto config = read_json(run / "config.json");
  CHECK(config["peers"] == 3);
  CHECK(config["epochs"] == 0.5);
  CHECK(config["monitor"] == "tcp://127.0.0.1:1");
  // config.json, the topology as mixed and the claim's run.json, nothing else: no peer started.
  std::set<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(run)) files.insert(e.path().filename());
  CHECK(files == std::set<std::string>{"config.json", "mixing.dot", "run.json"});
  CHECK(config["run_id"] == read_json(run / "run.json")["run_id"]);

  r = run_sgp("summarize " + dir.path().string());
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, (dir / "config.json").string()));

  // --base-port re-addresses the file's ports, keeping each rank's host; the peers read the
  // topology written to the run directory.
  const auto moved = dir / "moved";
  r = run_sgp("launch --prepare-only --base-port 41000 --topology " + topology.string() +
              " --run-dir " + moved.string());
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  const auto readdressed = moved / "topology-readdressed.dot";
  CHECK(read_json(moved / "config.json")["topology"] == readdressed.string());
  auto expected = sgp::topology::read_dot_file(topology);
  expected.set_endpoints(
      {"tcp://127.0.0.1:41000", "tcp://127.0.0.1:41001", "tcp://127.0.0.1:41002"});
  CHECK(sgp::topology::read_dot_file(readdressed) == expected);
}

TEST_CASE("summarize merges the per-host directories of one run and refuses another run's") {
  SGP_SKIP_WITHOUT_FASHION_MNIST();  // --prepare-only checks that the data is there
  sgp::testing::TempDir dir;
  const auto topology = sgp::testing::write_local_topology(dir / "t.dot", "ring", 4);
  auto prepare = [&](const std::string& name, const std::string& extra) {
    const auto r = run_sgp("launch --prepare-only --max-iterations 10 --topology " +
                           topology.string() + " --run-dir " + (dir / name).string() + extra);
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  };
  // Host a ran ranks 0 and 2, host b ranks 1 and 3 (no shared filesystem: two directories); a
  // hand-started monitor wrote its summary in a directory of its own.
  prepare("a", "");
  prepare("b", "");
  prepare("other", " --seed 7");
  auto peer = [&](const std::string& host, int rank, double accuracy) {
    std::ofstream(dir / host / fmt::format("peer-{}-summary.json", rank))
        << json{{"rank", rank},       {"peers", 4},    {"algo", "sgp"},
                {"iterations", 10},   {"weight", 1.0}, {"final_test_accuracy", accuracy},
                {"wall_time_s", rank}};
  };
  peer("a", 0, 0.5);
  peer("a", 2, 0.75);
  peer("b", 1, 0.25);
  peer("b", 3, 1.0);
  std::filesystem::create_directory(dir / "m");
  std::ofstream(dir / "m" / "monitor-summary.json")
      << json{{"evaluations", 2},
              {"final_iteration", 10},
              {"final_average_model_accuracy", 0.8125},
              {"final_consensus_error", 0.5}};
  const auto out = dir / "merged";
  auto r = run_sgp("summarize " + (dir / "a").string() + " " + (dir / "b").string() + " " +
                   (dir / "m").string() + " --out " + out.string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto summary = read_json(out / "summary.json");
  CHECK(summary["peers"] == 4);
  CHECK_FALSE(summary.contains("missing_peers"));
  CHECK(summary["mean_peer_accuracy"] == 0.625);
  CHECK(summary["min_peer_accuracy"] == 0.25);
  CHECK(summary["sum_of_weights"] == 4.0);
  CHECK(summary["wall_time_s"] == 3.0);
  CHECK(summary["final_average_model_accuracy"] == 0.8125);
  // Directories of different runs are refused, naming both.
  r = run_sgp("summarize " + (dir / "a").string() + " " + (dir / "other").string());
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, (dir / "a").string() + " and " + (dir / "other").string() +
                               " are not of one run: seed"));
  // So is the same rank's summary in two directories.
  peer("other", 1, 0.5);
  std::filesystem::copy_file(dir / "other" / "peer-1-summary.json",
                             dir / "a" / "peer-1-summary.json");
  r = run_sgp("summarize " + (dir / "a").string() + " " + (dir / "b").string());
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "both hold peer-1-summary.json"));
}

TEST_CASE("a monitor started by hand with the run's config stops once every peer has finished") {
  SGP_SKIP_WITHOUT_FASHION_MNIST();
  sgp::testing::TempDir dir;
  const auto topology = sgp::testing::write_local_topology(dir / "t.dot", "ring", 2);
  const std::string settings =
      " --device cpu --topology " + topology.string() + " --max-iterations 30 --eval-every 0.1";
  const auto m = dir / "m";
  REQUIRE(run_sgp("launch --prepare-only --run-dir " + m.string() + settings).exit_code == 0);
  const auto log = dir / "monitor.log";
  const pid_t monitor = start_sgp(
      "monitor --config " + (m / "config.json").string() + " --bind tcp://127.0.0.1:*", log);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::string endpoint;
  while (endpoint.empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const std::string text = slurp(log);
    const auto at = text.find("listening on ");
    if (at != std::string::npos) endpoint = text.substr(at + 13, text.find(' ', at + 13) - at - 13);
  }
  INFO(slurp(log));
  REQUIRE(!endpoint.empty());
  CHECK(contains(slurp(log), "until iteration 30"));
  const auto peers =
      run_sgp("launch --run-dir " + (dir / "a").string() + " --monitor " + endpoint + settings);
  INFO(peers.output);
  CHECK(peers.exit_code == 0);
  int status = -1;
  while (::waitpid(monitor, &status, WNOHANG) == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!WIFEXITED(status)) ::kill(monitor, SIGKILL);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  const auto records = read_jsonl(m / "monitor.jsonl");
  REQUIRE(!records.empty());  // (back() of none crashed the whole suite once)
  CHECK(records.back()["iteration"] == 30);
  CHECK(std::filesystem::exists(m / "model-average.bin"));
}

TEST_CASE("SGP on a star against local-only peers on the same shards: consensus, accuracy, mass") {
  SGP_SKIP_WITHOUT_FASHION_MNIST();
  sgp::testing::TempDir dir;
  // The star's hub keeps 1/4 and each leaf 1/2: the weights are not doubly stochastic, so the
  // individual w move (hub 1.6, leaves 0.8) while their sum must stay 4.
  const auto topology = sgp::testing::write_launch_topology(dir / "t.dot", "star", 4);
  const std::string common =
      "launch --device cpu --epochs 0.5 --eval-every 0.5 --log-level warn "
      "--topology " +
      topology.string();
  // Over ZeroMQ only (shared memory: the first test of this file).
  const auto sgp_run =
      run_sgp(common + " --algo sgp --no-local-fast-path --run-dir " + (dir / "sgp").string());
  INFO(sgp_run.output);
  REQUIRE(sgp_run.exit_code == 0);
  const auto local_run = run_sgp(common + " --algo local --run-dir " + (dir / "local").string());
  INFO(local_run.output);
  REQUIRE(local_run.exit_code == 0);
  const auto sgp = read_json(dir / "sgp" / "summary.json");
  const auto local = read_json(dir / "local" / "summary.json");
  const double sgp_error = sgp["final_consensus_error"];
  const double local_error = local["final_consensus_error"];
  const double average = sgp["final_average_model_accuracy"];
  const double best_local = local["max_peer_accuracy"];
  MESSAGE("consensus error: sgp " << sgp_error << ", local-only " << local_error);
  MESSAGE("sgp average model " << average << ", best local-only peer " << best_local);
  // Local-only peers drift apart (~1e-2); SGP's peers agree to ~1e-12.
  CHECK(local_error > 1e-3);
  CHECK(sgp_error < 1e-6 * local_error);
  CHECK(average > best_local);

  CHECK(sgp["sum_of_weights"].get<double>() == doctest::Approx(4.0).epsilon(1e-12));
  CHECK(sgp["shm_bytes"] == 0);
  CHECK_FALSE(local.contains("zmq_bytes"));  // no transport at all
  for (int rank = 0; rank < 4; ++rank) {
    CAPTURE(rank);
    const auto peer = read_json(dir / "sgp" / ("peer-" + std::to_string(rank) + "-summary.json"));
    CHECK(std::abs(peer["weight"].get<double>() - 1.0) > 0.1);
    CHECK(peer["shm_bytes"] == 0);
    // Every byte the engine sent (less a rounding of the mean), and nothing else but notices.
    CHECK(peer["zmq_bytes"].get<double>() >= (1 - 1e-12) *
                                                 peer["bytes_sent_per_iteration"].get<double>() *
                                                 peer["iterations"].get<double>());
    // --log-level warn reached every peer (through the run's config.json): no info lines.
    CHECK_FALSE(contains(slurp(dir / "sgp" / ("peer-" + std::to_string(rank) + ".log")), "[info]"));
  }
}

TEST_CASE("an interrupted run resumes from its newest complete checkpoint and finishes") {
  SGP_SKIP_WITHOUT_FASHION_MNIST();
  sgp::testing::TempDir dir;
  const auto topology =
      sgp::testing::write_launch_topology(dir / "t.dot", "one-peer-exponential", 4);
  const auto run = dir / "run";
  const std::string args = short_run(topology, run, 160) + " --checkpoint-every 20";
  const pid_t launcher = start_sgp(args, dir / "first.log");
  // Stop it (Ctrl-C) once every peer has written its checkpoint of iteration 40.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  auto all_have = [&](int iteration) {
    for (int rank = 0; rank < 4; ++rank) {
      if (!std::filesystem::exists(
              run / "checkpoints" /
              ("checkpoint-" + std::to_string(rank) + "-" + std::to_string(iteration) + ".bin")))
        return false;
    }
    return true;
  };
  while (!all_have(40) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  REQUIRE(all_have(40));
  ::kill(launcher, SIGINT);
  int status = 0;
  ::waitpid(launcher, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);  // interrupted by SIGINT, as a shell reports it
  CHECK(processes_mentioning(run.string()) == 0);
  const auto stopped_at = read_jsonl(run / "peer-0.jsonl").back()["iteration"].get<int>();
  REQUIRE(stopped_at < 160);

  // A resume takes the run's settings from its config.json; flags that contradict what the
  // checkpoints need are refused, each named, and nothing is touched.
  const std::string log_before = slurp(run / "peer-0.jsonl");
  const auto contradicted =
      run_sgp("launch --run-dir " + run.string() + " --resume --batch-size 7 --seed 3");
  CHECK(contradicted.exit_code == 2);
  CHECK(contains(contradicted.output, "--batch-size: 32 recorded"));
  CHECK(contains(contradicted.output, "--seed: 0 recorded"));
  CHECK(slurp(run / "peer-0.jsonl") == log_before);
  // Without the original flags (and with one that may change: the time-out).
  const auto second = run_sgp("launch --run-dir " + run.string() + " --resume --timeout-ms 25000");
  INFO(second.output);
  REQUIRE(second.exit_code == 0);
  CHECK(contains(second.output, "average model: test accuracy"));  // the monitor ran
  CHECK(read_json(run / "config.json")["timeout_ms"] == 25000);
  CHECK(read_json(run / "config.json")["checkpoint_every"] == 20);
  for (int rank = 0; rank < 4; ++rank) {
    CHECK(
        contains(slurp(run / ("peer-" + std::to_string(rank) + ".log")), "resumed from iteration"));
  }
  const auto summary = read_json(run / "summary.json");
  CHECK(summary["sum_of_weights"].get<double>() == doctest::Approx(4.0).epsilon(1e-12));
  CHECK(summary["final_consensus_error"].get<double>() < 1e-8);
  // The log reads as one run: the records after the checkpoint the resume started from were
  // dropped, so no iteration repeats and wall_time never goes back; training records come every
  // --log-every 10 iterations and cover those 10 (evaluations every 47 are rows of their own).
  const auto records = read_jsonl(run / "peer-0.jsonl");
  CHECK(records.back()["iteration"] == 160);
  for (std::size_t i = 1; i < records.size(); ++i) {
    CAPTURE(records[i].dump());
    CHECK(records[i]["iteration"].get<int>() > records[i - 1]["iteration"].get<int>());
    CHECK(records[i]["wall_time"].get<double>() >= records[i - 1]["wall_time"].get<double>());
  }
  int training_rows = 0;
  for (const auto& r : records) {
    CAPTURE(r.dump());
    if (!r.contains("loss")) {
      CHECK(r.contains("test_accuracy"));
      continue;
    }
    ++training_rows;
    CHECK(r["iteration"].get<int>() % 10 == 0);
    CHECK(r["interval"] == 10);
  }
  CHECK(training_rows == 16);
}

// ogt: gradient tracking over the overlap engine in real processes, with checkpoints (taken once
// the mass in flight is in; tests/test_peer_training.cpp checks their state and the resume).
TEST_CASE("ogt over ZeroMQ: 4 processes train and checkpoint; --compress is refused") {
  SGP_SKIP_WITHOUT_FASHION_MNIST();
  sgp::testing::TempDir dir;
  const auto topology =
      sgp::testing::write_launch_topology(dir / "t.dot", "one-peer-exponential", 4);
  const auto run = dir / "run";
  const auto r = run_sgp(short_run(topology, run, 10) + " --algo ogt --checkpoint-every 5");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto summary = read_json(run / "summary.json");
  CHECK(summary["algo"] == "ogt");
  CHECK(summary["sum_of_weights"].get<double>() == doctest::Approx(4.0).epsilon(1e-12));
  // The peers agree: 1e-7 to 1.5e-6 here, depending on when the last rounds' messages landed
  // (arrival order, under load); --algo local's peers end 4e-4 apart after these 10 iterations.
  CHECK(summary["final_consensus_error"].get<double>() < 2e-5);
  for (int rank = 0; rank < 4; ++rank)
    CHECK(std::filesystem::exists(run / "checkpoints" /
                                  ("checkpoint-" + std::to_string(rank) + "-10.bin")));
  const auto refused =
      run_sgp(short_run(topology, dir / "refused", 10) + " --algo ogt --compress fp16");
  CHECK(refused.exit_code == 2);
  CHECK(contains(refused.output, "--compress fp16: ogt sends its rounds of [x; y] in float32"));
}

TEST_CASE("a finished run: --resume says so and changes nothing; a new run there is refused") {
  SGP_SKIP_WITHOUT_FASHION_MNIST();
  sgp::testing::TempDir dir;
  const auto topology = sgp::testing::write_launch_topology(dir / "t.dot", "ring", 2);
  const auto run = dir / "run";
  const std::string args = short_run(topology, run, 20) + " --checkpoint-every 10";
  const auto first = run_sgp(args);
  INFO(first.output);
  REQUIRE(first.exit_code == 0);
  const std::string summary = slurp(run / "summary.json"), log = slurp(run / "peer-0.jsonl");
  REQUIRE(read_json(run / "summary.json")["iterations"] == 20);

  const auto resumed = run_sgp("launch --run-dir " + run.string() + " --resume");
  INFO(resumed.output);
  CHECK(resumed.exit_code == 0);
  CHECK(contains(resumed.output, "is finished (every peer here wrote its summary); nothing to do"));
  CHECK(slurp(run / "summary.json") == summary);
  CHECK(slurp(run / "peer-0.jsonl") == log);

  const auto again = run_sgp(args);
  CHECK(again.exit_code == 2);
  CHECK(contains(again.output, "holds another run's results"));
  CHECK(contains(again.output, "give --resume to continue that run, --overwrite to delete them"));
  CHECK(slurp(run / "summary.json") == summary);
}

TEST_CASE("a peer killed mid-run is reported by rank and signal, and the others stop") {
  SGP_SKIP_WITHOUT_FASHION_MNIST();
  sgp::testing::TempDir dir;
  const auto topology =
      sgp::testing::write_launch_topology(dir / "t.dot", "one-peer-exponential", 4);
  const auto run = dir / "run";
  const auto log = dir / "launch.log";
  const pid_t launcher = start_sgp(short_run(topology, run, 100000, 5000), log);
  // Wait until rank 2 has logged, then kill -9 it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!std::filesystem::exists(run / "peer-2.jsonl") &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  REQUIRE(std::filesystem::exists(run / "peer-2.jsonl"));
  REQUIRE(sgp::testing::signal_launched_peer(run, 2, "9"));
  const auto started = std::chrono::steady_clock::now();
  int status = 0;
  ::waitpid(launcher, &status, 0);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const std::string output = slurp(log);
  INFO(output);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 3);
  CHECK(contains(output, "rank 2 was killed by signal 9"));
  CHECK(seconds < 60.0);
  CHECK(processes_mentioning(run.string()) == 0);
}

TEST_CASE("bad peer input: a rank the topology or the environment contradicts gets clear errors") {
  sgp::testing::TempDir dir;
  const auto topology =
      sgp::testing::write_local_topology(dir / "t.dot", "one-peer-exponential", 4);
  const std::string base =
      "--device cpu --topology " + topology.string() + " --run-dir " + (dir / "run").string();
  SUBCASE("rank outside the topology") {
    const auto r = run_sgp("peer --rank 4 " + base);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.output, "--rank 4"));
    CHECK(contains(r.output, "0..3"));
  }
  SUBCASE("WORLD_SIZE that does not match the topology") {
    const auto r = sgp::testing::run_command("WORLD_SIZE=3 " + sgp::testing::sgp_binary().string() +
                                             " peer --rank 0 " + base);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.output, "$WORLD_SIZE is 3, but " + topology.string() + " has 4 peers"));
  }
  SUBCASE("no rank at all") {
    const auto r = sgp::testing::run_command("env -u RANK -u SLURM_PROCID " +
                                             sgp::testing::sgp_binary().string() + " peer " + base);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.output, "RANK or SLURM_PROCID"));
  }
  SUBCASE("rank from $RANK that is not a number") {
    const auto r = sgp::testing::run_command("RANK=two " + sgp::testing::sgp_binary().string() +
                                             " peer " + base);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.output, "$RANK: 'two' is not a rank"));
  }
}

TEST_CASE("bad peer input: port 0 is for sgp launch to pick, for the ranks it starts") {
  sgp::testing::TempDir dir;
  const auto free =
      sgp::testing::write_launch_topology(dir / "free.dot", "one-peer-exponential", 4);
  const std::string settings =
      " --device cpu --topology " + free.string() + " --run-dir " + (dir / "free").string();
  const auto by_hand = run_sgp("peer --rank 1" + settings);
  CHECK(by_hand.exit_code == 2);
  CHECK(contains(by_hand.output, "rank 1's endpoint tcp://127.0.0.1:0 has no port number"));
  for (const char* some : {"launch --ranks 0,1", "launch --prepare-only"}) {
    const auto r = run_sgp(some + settings);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.output, "has no port number, and rank"));
  }
}

TEST_CASE("bad peer input: algorithms, flags, endpoints and files get clear errors") {
  sgp::testing::TempDir dir;
  const std::string base =
      "--device cpu --topology " +
      sgp::testing::write_local_topology(dir / "t.dot", "one-peer-exponential", 4).string() +
      " --run-dir " + (dir / "run").string();
  SUBCASE("unknown algorithm") {
    const auto r = run_sgp("launch --algo gossip " + base);
    CHECK(r.exit_code != 0);
    CHECK(contains(r.output, "--algo"));
  }
  SUBCASE("dpsgd on a directed graph") {
    const auto ring = sgp::testing::write_local_topology(dir / "ring.dot", "ring", 3);
    const auto r = run_sgp("peer --rank 0 --algo dpsgd --device cpu --topology " + ring.string() +
                           " --run-dir " + (dir / "x").string());
    CHECK(r.exit_code == 2);
    CHECK(contains(r.output, "undirected"));
    CHECK(contains(r.output, "ring.dot"));
  }
  SUBCASE("sgp launch refuses what its peers would, before any starts") {
    const auto ring = sgp::testing::write_local_topology(dir / "ring.dot", "ring", 3);
    const auto run = dir / "launched";
    const auto r = run_sgp("launch --algo dpsgd --device cpu --topology " + ring.string() +
                           " --run-dir " + run.string());
    CHECK(r.exit_code == 2);
    CHECK(contains(r.output, "--algo dpsgd needs an undirected topology"));
    CHECK_FALSE(std::filesystem::exists(run / "peer-0.log"));
    CHECK_FALSE(std::filesystem::exists(run / "config.json"));
    const auto data = run_sgp("launch --data-dir " + (dir / "nodata").string() + " " + base);
    CHECK(data.exit_code == 2);
    CHECK(contains(data.output, "nodata does not exist"));
  }
  SUBCASE("command-line errors of CLI11 exit 2") {
    CHECK(run_sgp("launch --no-such-flag").exit_code == 2);
    CHECK(run_sgp("launch --epochs").exit_code == 2);
    CHECK(run_sgp("no-such-command").exit_code == 2);
  }
  SUBCASE("exact on a graph that is not complete") {
    const auto r = run_sgp("peer --rank 0 --algo exact " + base);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.output, "complete topology"));
  }
  SUBCASE("an endpoint that cannot be bound") {
    SGP_SKIP_WITHOUT_FASHION_MNIST();  // the peer loads its data before it binds
    const auto bad = sgp::testing::write_local_topology(dir / "bad.dot", "one-peer-exponential", 4,
                                                        "tcp://192.0.2.1:5600");
    const auto r = run_sgp("peer --rank 3 --device cpu --insecure --topology " + bad.string() +
                           " --run-dir " + (dir / "y").string());
    CHECK(r.exit_code == 3);
    CHECK(contains(r.output, "192.0.2.1:5600"));
  }
  SUBCASE("an endpoint that is not a ZeroMQ address: the peers' --monitor, the monitor's --bind") {
    const auto peer = run_sgp("peer --rank 0 --monitor 127.0.0.1:29400 " + base);
    CHECK(peer.exit_code == 2);
    CHECK(contains(peer.output,
                   "--monitor: endpoint '127.0.0.1:29400' is not a ZeroMQ address "
                   "like tcp://HOST:PORT (no SCHEME://)"));
    const auto monitor = run_sgp("monitor --bind tcp://127.0.0.1 --topology " +
                                 (dir / "t.dot").string() + " --run-dir " + (dir / "m").string());
    CHECK(monitor.exit_code == 2);
    CHECK(contains(monitor.output,
                   "--bind: endpoint 'tcp://127.0.0.1' is not a ZeroMQ address "
                   "like tcp://HOST:PORT (no :PORT)"));
  }
  SUBCASE("a topology file that does not exist") {
    const auto r = run_sgp("launch --topology " + (dir / "none.dot").string());
    CHECK(r.exit_code != 0);
    CHECK(contains(r.output, "none.dot"));
  }
}

// A launch refused or failed before anything trained leaves no run behind, so the corrected
// command can use the same --run-dir (issue 39, item 4).
TEST_CASE("a refused launch and a bind conflict leave no run directory; the fixed command runs") {
  SGP_SKIP_WITHOUT_FASHION_MNIST();  // the peers load their data before they bind
  sgp::testing::TempDir dir;
  const auto run = dir / "run";
  SUBCASE("a keyed topology without --keys, then with them") {
    const auto ring = sgp::testing::write_local_topology(dir / "ring.dot", "ring", 2);
    const auto keygen = run_sgp("keygen --topology " + ring.string() + " --keys " +
                                (dir / "keys").string() + " --out " + (dir / "keyed.dot").string());
    REQUIRE(keygen.exit_code == 0);
    const std::string args = short_run(dir / "keyed.dot", run, 10);
    const auto refused = run_sgp(args);
    CHECK(refused.exit_code == 2);
    CHECK(contains(refused.output, "give --keys DIR"));
    CHECK_FALSE(std::filesystem::exists(run));
    const auto fixed = run_sgp(args + " --keys " + (dir / "keys").string());
    INFO(fixed.output);
    CHECK(fixed.exit_code == 0);
    CHECK(contains(fixed.output, "CURVE: every connection between the peers and to the monitor"));
  }
  SUBCASE("an endpoint another process holds, found once the peers start") {
    const int held = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(held >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    REQUIRE(::bind(held, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::listen(held, 1) == 0);
    REQUIRE(::getsockname(held, reinterpret_cast<sockaddr*>(&address), &length) == 0);
    const std::string taken = fmt::format("tcp://127.0.0.1:{}", ntohs(address.sin_port));
    const auto ring = sgp::testing::write_local_topology(dir / "taken.dot", "ring", 2, taken);
    const auto failed = run_sgp(short_run(ring, run, 10));
    ::close(held);
    INFO(failed.output);
    CHECK(failed.exit_code == 3);
    CHECK(contains(failed.output, taken.substr(6)));
    CHECK_FALSE(std::filesystem::exists(run));
    const auto free = sgp::testing::write_local_topology(dir / "free.dot", "ring", 2);
    CHECK(run_sgp(short_run(free, run, 10)).exit_code == 0);
  }
}

// "Train one more epoch": --resume of a finished run with more iterations goes on from its last
// checkpoint (issue 39, item 5); without checkpoints it says it cannot.
TEST_CASE("--resume with more --max-iterations extends a finished run from its last checkpoint") {
  SGP_SKIP_WITHOUT_FASHION_MNIST();
  sgp::testing::TempDir dir;
  const auto topology = sgp::testing::write_local_topology(dir / "t.dot", "ring", 2);
  const auto run = dir / "run";
  REQUIRE(run_sgp(short_run(topology, run, 20) + " --checkpoint-every 10").exit_code == 0);
  const auto extended =
      run_sgp("launch --run-dir " + run.string() + " --resume --max-iterations 30");
  INFO(extended.output);
  CHECK(extended.exit_code == 0);
  CHECK(contains(slurp(run / "peer-0.log"), "resumed from iteration 20"));
  CHECK(read_json(run / "summary.json")["iterations"] == 30);
  CHECK(read_jsonl(run / "peer-1.jsonl").back()["iteration"] == 30);

  const auto plain = dir / "plain";
  REQUIRE(run_sgp(short_run(topology, plain, 20)).exit_code == 0);
  const auto refused =
      run_sgp("launch --run-dir " + plain.string() + " --resume --max-iterations 30");
  CHECK(refused.exit_code == 2);
  CHECK(contains(refused.output, "finished at iteration 20 without a checkpoint there"));
  CHECK(read_json(plain / "summary.json")["iterations"] == 20);
}
