// `sgp train` end to end, as a user runs it: real data, real process, real files.
#include <fstream>
#include <string>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "support/skip.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"
#include "support/text.hpp"

using sgp::testing::contains;
using sgp::testing::run_sgp;

namespace {}  // namespace

TEST_CASE("sgp train for one epoch reaches 84% test accuracy and writes its run directory") {
  SGP_SKIP_WITHOUT_FASHION_MNIST();
  sgp::testing::TempDir dir;
  const auto run = dir / "run";
  const auto result = run_sgp("train --epochs 1 --device cpu --run-dir " + run.string());
  INFO(result.output);
  REQUIRE(result.exit_code == 0);

  const auto summary = nlohmann::json::parse(std::ifstream(run / "summary.json"));
  CHECK(summary["final_test_accuracy"].get<double>() >= 0.84);
  CHECK(summary["iterations"].get<int>() == 1875);  // 60000 / 32, rounded up
  CHECK(summary["algo"] == "local");  // one process mixes with nobody (issue 39, item 8)
  const auto config = nlohmann::json::parse(std::ifstream(run / "config.json"));
  CHECK(config["algo"] == "local");
  CHECK(config["batch_size"] == 32);
  CHECK(config["command"] == "train");

  std::ifstream log(run / "peer-0.jsonl");
  std::string line;
  int records = 0, evaluations = 0;
  std::int64_t last_iteration = 0;
  while (std::getline(log, line)) {
    const auto record = nlohmann::json::parse(line);
    CHECK(record["iteration"].get<std::int64_t>() > last_iteration);
    last_iteration = record["iteration"].get<std::int64_t>();
    for (const char* key : {"epoch", "wall_time"}) CHECK(record.contains(key));
    evaluations += record.contains("test_accuracy");
    if (!record.contains("loss")) continue;  // an evaluation between two training records
    // Training records every --log-every 50 iterations (and the last), each covering its own.
    CHECK(record.contains("lr"));
    CHECK((last_iteration % 50 == 0 || last_iteration == 1875));
    CHECK(record["interval"] == (last_iteration == 1875 ? 25 : 50));
    ++records;
  }
  CHECK(last_iteration == 1875);
  CHECK(records == 1875 / 50 + 1);
  CHECK(evaluations == 4);  // every quarter epoch
}

TEST_CASE("sgp train rejects bad flags and bad data with clear messages") {
  sgp::testing::TempDir dir;
  SUBCASE("a model or partition that does not parse") {
    auto r = run_sgp("train --model lenet:3 --run-dir " + (dir / "m").string());
    CHECK(r.exit_code == 2);
    CHECK(contains(r.output, "--model: 'lenet:3' is not a model: lenet and lenet-wide take no"));
    r = run_sgp("train --partition dirichlet:-1 --run-dir " + (dir / "p").string());
    CHECK(r.exit_code == 2);
    CHECK(contains(r.output, "--partition: 'dirichlet:-1' is not a partition"));
  }
  SUBCASE("unknown device") {
    const auto r = run_sgp("train --device gpu --run-dir " + (dir / "a").string());
    CHECK(r.exit_code == 2);
    CHECK(contains(r.output, "--device: 'gpu' is not a device"));
  }
  SUBCASE("negative batch") {
    const auto r = run_sgp("train --batch-size -3");
    CHECK(r.exit_code != 0);
    CHECK(contains(r.output, "--batch-size"));
  }
  SUBCASE("missing data directory") {
    const auto r = run_sgp("train --device cpu --data-dir " + (dir / "none").string() +
                           " --run-dir " + (dir / "b").string());
    CHECK(r.exit_code == 2);
    CHECK(contains(r.output, "train-labels-idx1-ubyte"));  // the first file a peer reads
    CHECK(contains(r.output, "no such file"));
  }
  SUBCASE("corrupt data file") {
    std::filesystem::create_directories(dir / "data");
    std::ofstream(dir / "data" / "train-labels-idx1-ubyte.gz") << "this is not gzip";
    const auto r = run_sgp("train --device cpu --data-dir " + (dir / "data").string() +
                           " --run-dir " + (dir / "c").string());
    CHECK(r.exit_code == 2);
    CHECK(contains(r.output, "train-labels-idx1-ubyte.gz"));
  }
  SUBCASE("help explains the flags") {
    const auto r = run_sgp("train --help");
    CHECK(r.exit_code == 0);
    for (const char* flag : {"--epochs", "--lr", "--device", "--run-dir", "--data-dir"})
      CHECK(contains(r.output, flag));
  }
}
