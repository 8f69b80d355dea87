#include <fstream>
#include <set>
#include <sstream>

#include <doctest/doctest.h>

#include "sgp/error.hpp"
#include "sgp/peer/run_directory.hpp"
#include "sgp/peer/trainer.hpp"
#include "support/temp_dir.hpp"
#include "support/text.hpp"

using namespace sgp::peer;
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
  CHECK(percentiles({}, 20).median == 0.0);
}

#include "sgp/peer/checkpoint_store.hpp"

TEST_CASE("checkpoints round-trip, prune old ones and detect damage") {
  sgp::testing::TempDir dir;
  CheckpointStore store(dir / "ckpt", 1);
  CheckpointState s;
  s.epoch = 2;
  s.position = 96;
  s.weight = 0.75;
  s.x = {1.0f, -2.5f, 3.25f};
  s.velocity = {0.5f, 0.25f, -0.125f};
  for (std::int64_t it : {100, 200, 300}) {
    s.iteration = it;
    store.save(s);
  }
  CHECK(store.available() == std::vector<std::int64_t>{200, 300});
  const auto back = store.load(300);
  CHECK(back.iteration == 300);
  CHECK(back.epoch == 2);
  CHECK(back.position == 96);
  CHECK(back.weight == 0.75);
  CHECK(back.x == s.x);
  CHECK(back.velocity == s.velocity);

  // Flip one payload byte: the checksum names the file.
  {
    std::fstream f(store.file(300), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x7f');
  }
  try {
    store.load(300);
    FAIL("damage not detected");
  } catch (const sgp::InputError& e) {
    CHECK(std::string(e.what()).find("checkpoint-1-300.bin") != std::string::npos);
  }
  // Truncation too.
  std::filesystem::resize_file(store.file(200), 20);
  CHECK_THROWS_AS(store.load(200), sgp::InputError);
}

TEST_CASE("the newest complete checkpoint set is the newest iteration every rank has") {
  sgp::testing::TempDir dir;
  CheckpointState s;
  s.x = {1.0f};
  for (int rank = 0; rank < 3; ++rank) {
    CheckpointStore store(dir.path(), rank);
    for (std::int64_t it : {10, 20}) {
      s.iteration = it;
      store.save(s);
    }
  }
  // Rank 2 died before writing iteration 30.
  for (int rank = 0; rank < 2; ++rank) {
    s.iteration = 30;
    CheckpointStore(dir.path(), rank).save(s);
  }
  CHECK(latest_complete_checkpoint(dir.path(), 3) == 20);
  CHECK(latest_complete_checkpoint(dir.path(), 4) == std::nullopt);
  // A rank in the middle missing counts as much as the last one.
  sgp::testing::TempDir other;
  for (int rank = 0; rank < 3; ++rank) {
    s.iteration = 10;
    CheckpointStore(other.path(), rank).save(s);
    if (rank == 1) continue;  // rank 1 died before writing iteration 20
    s.iteration = 20;
    CheckpointStore(other.path(), rank).save(s);
  }
  CHECK(latest_complete_checkpoint(other.path(), 3) == 10);
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
