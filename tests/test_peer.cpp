#include <stdlib.h>

#include <atomic>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <doctest/doctest.h>

#include "sgp/config/run_length.hpp"
#include "sgp/error.hpp"
#include "sgp/peer/peer_runner.hpp"
#include "sgp/peer/trainer.hpp"
#include "sgp/run/percentiles.hpp"
#include "sgp/run/run_directory.hpp"
#include "sgp/topology/generator.hpp"
#include "support/temp_dir.hpp"
#include "support/text.hpp"

using namespace sgp::peer;
using namespace sgp::config;
using namespace sgp::run;
using sgp::testing::slurp;

namespace {}  // namespace

TEST_CASE("atomic writes replace the whole file and leave no temporary behind") {
  sgp::testing::TempDir dir;
  write_file_atomically(dir / "a.json", "first");
  write_file_atomically(dir / "a.json", "second, longer");
  CHECK(slurp(dir / "a.json") == "second, longer");
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++entries;
  CHECK(entries == 1);
  CHECK_THROWS_AS(write_file_atomically(dir / "missing" / "b", "x"), sgp::IoError);
}

TEST_CASE("writers of one file at once (hosts sharing a run directory) never clash") {
  sgp::testing::TempDir dir;
  std::atomic<int> failures{0};
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        try {
          write_file_atomically(dir / "config.json", "writer " + std::to_string(t));
        } catch (const sgp::IoError&) {
          ++failures;
        }
      }
    });
  }
  for (auto& w : writers) w.join();
  CHECK(failures == 0);
  CHECK(slurp(dir / "config.json").starts_with("writer "));
  // create_file_atomically: only the first creates it.
  CHECK(create_file_atomically(dir / "summary.json", "first"));
  CHECK_FALSE(create_file_atomically(dir / "summary.json", "second"));
  CHECK(slurp(dir / "summary.json") == "first");
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++entries;
  CHECK(entries == 2);
}

TEST_CASE("a run directory holds config, one JSONL line per record and the summary") {
  sgp::testing::TempDir dir;
  RunDirectory run(dir / "run", 3);
  run.write_json("config.json", {{"lr", 0.1}});
  run.log({{"iteration", 1}});
  run.log({{"iteration", 2}});
  CHECK(nlohmann::json::parse(slurp(dir / "run" / "config.json"))["lr"] == 0.1);
  CHECK(slurp(dir / "run" / "peer-3.jsonl") == "{\"iteration\":1}\n{\"iteration\":2}\n");
  std::ofstream(dir / "file") << "x";
  CHECK_THROWS_AS(RunDirectory(dir / "file", 0), sgp::InputError);
}

TEST_CASE("iterations per epoch are the same on every peer") {
  CHECK(iterations_per_epoch(60000, 1, 32) == 1875);
  CHECK(iterations_per_epoch(60000, 4, 32) == 469);
  CHECK(iterations_per_epoch(60000, 7, 32) == 268);
}

TEST_CASE("percentiles skip the warm-up iterations") {
  std::vector<double> times(20, 100.0);  // warm-up, ignored
  for (int i = 1; i <= 11; ++i) times.push_back(i);
  const auto p = percentiles(times, 20);
  CHECK(p.median == 6.0);
  CHECK(p.p90 == 10.0);
  CHECK(p.mean == 6.0);
  CHECK(percentiles({1.0, 2.0, 9.0}, 0).mean == 4.0);  // the mean counts every slow step
  CHECK(percentiles({}, 20).median == 0.0);
}

TEST_CASE("default run directories started in the same second never collide") {
  sgp::testing::TempDir dir;
  std::set<std::filesystem::path> made;
  for (int i = 0; i < 5; ++i) {
    const auto run = create_default_run_dir("consensus", dir / "runs");
    CHECK(std::filesystem::is_directory(run));
    CHECK(run.filename().string().starts_with("consensus-"));
    made.insert(run);
  }
  CHECK(made.size() == 5u);
}

TEST_CASE("a peer's place on its host: $LOCAL_RANK, else the lower ranks on the same host") {
  sgp::topology::GeneratorOptions options;
  options.num_peers = 4;
  options.hosts = {"a", "b", "a", "a"};
  const auto schedule = generate_topology(sgp::topology::TopologyKind::kRing, options);
  ::unsetenv("LOCAL_RANK");
  CHECK(local_peer_index(schedule, 0) == 0);
  CHECK(local_peer_index(schedule, 1) == 0);
  CHECK(local_peer_index(schedule, 2) == 1);
  CHECK(local_peer_index(schedule, 3) == 2);
  ::setenv("LOCAL_RANK", "5", 1);
  CHECK(local_peer_index(schedule, 0) == 5);
  ::setenv("LOCAL_RANK", "x", 1);
  CHECK_THROWS_WITH_AS(local_peer_index(schedule, 0), doctest::Contains("$LOCAL_RANK: 'x'"),
                       sgp::InputError);
  ::unsetenv("LOCAL_RANK");
}
