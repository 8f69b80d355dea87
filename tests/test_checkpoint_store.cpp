// Checkpoint files: round trip, pruning of this run's files only, and every way a file can be
// damaged, crafted, another run's or another version's.
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

#include <doctest/doctest.h>

#include "sgp/error.hpp"
#include "sgp/peer/checkpoint_store.hpp"
#include "sgp/run/file_names.hpp"
#include "support/input_error.hpp"
#include "support/temp_dir.hpp"
#include "support/text.hpp"

using namespace sgp::peer;
using namespace sgp::run;
using sgp::testing::contains;
using sgp::testing::input_error_of;
using sgp::testing::slurp;

namespace {

const std::string kRunA = "0123456789abcdef0123456789abcdef";
const std::string kRunB = "fedcba9876543210fedcba9876543210";

CheckpointState sample_state(std::int64_t iteration) {
  CheckpointState s;
  s.iteration = iteration;
  s.epoch = 2;
  s.position = 96;
  s.weight = 0.75;
  s.x = {1.0f, -2.5f, 3.25f};
  s.velocity = {0.5f, 0.25f, -0.125f};
  return s;
}

// Header offsets of the version 2 format (checkpoint_store.hpp).
constexpr std::size_t kRank = 12, kIteration = 16, kEpoch = 24, kWeight = 40, kNx = 48;

void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Writes `value` at `offset` and recomputes the trailing checksum: a crafted file, which only
// the field checks can refuse.
template <class T>
void patch_sealed(const std::filesystem::path& path, std::size_t offset, T value) {
  std::string bytes = slurp(path);
  std::memcpy(bytes.data() + offset, &value, sizeof value);
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (std::size_t i = 0; i + 8 < bytes.size(); ++i) {
    hash = (hash ^ static_cast<unsigned char>(bytes[i])) * 0x100000001b3ull;
  }
  std::memcpy(bytes.data() + bytes.size() - 8, &hash, 8);
  write_bytes(path, bytes);
}

}  // namespace

TEST_CASE("checkpoints round-trip and keep the two newest of this run") {
  sgp::testing::TempDir dir;
  CheckpointStore store(dir / "ckpt", 1, kRunA, {{"seed", 3}});
  for (std::int64_t it : {100, 200, 300}) store.save(sample_state(it));
  CHECK(store.available() == std::vector<std::int64_t>{200, 300});
  const auto back = store.load(300, 3);
  const auto s = sample_state(300);
  CHECK(back.iteration == 300);
  CHECK(back.epoch == 2);
  CHECK(back.position == 96);
  CHECK(back.weight == 0.75);
  CHECK(back.x == s.x);
  CHECK(back.velocity == s.velocity);
}

TEST_CASE("the checksum covers the header: a changed weight is damage, not a resume") {
  sgp::testing::TempDir dir;
  CheckpointStore store(dir.path(), 1, kRunA);
  store.save(sample_state(300));
  std::string bytes = slurp(store.file(300));
  const double weight = 1.25;
  std::memcpy(bytes.data() + kWeight, &weight, sizeof weight);
  write_bytes(store.file(300), bytes);
  const auto error = input_error_of([&] { store.load(300); });
  CHECK(contains(error, "damaged checkpoint"));
  CHECK(contains(error, "checkpoint-1-300.bin: checksum mismatch"));
  // A payload byte and a truncation as well.
  store.save(sample_state(400));
  bytes = slurp(store.file(400));
  bytes[bytes.size() - 9] ^= 0x40;
  write_bytes(store.file(400), bytes);
  CHECK(contains(input_error_of([&] { store.load(400); }), "checksum mismatch"));
  std::filesystem::resize_file(store.file(400), 20);
  CHECK(contains(input_error_of([&] { store.load(400); }), "shorter than a header"));
}

TEST_CASE("every header field is validated: a crafted file is 'damaged checkpoint FILE: what'") {
  sgp::testing::TempDir dir;
  CheckpointStore store(dir.path(), 1, kRunA);
  auto refusal = [&](auto patch) {
    store.save(sample_state(300));
    patch(store.file(300));
    return input_error_of([&] { store.load(300, 3); });
  };
  const std::string name = "checkpoint-1-300.bin: ";
  CHECK(contains(refusal([](auto p) { patch_sealed(p, kRank, std::uint32_t{7}); }),
                 name + "holds rank 7, expected 1"));
  CHECK(contains(refusal([](auto p) { patch_sealed(p, kIteration, std::int64_t{-5}); }),
                 name + "holds iteration -5, its name says 300"));
  CHECK(contains(refusal([](auto p) { patch_sealed(p, kEpoch, std::int64_t{-1}); }),
                 name + "epoch -1 is negative"));
  for (double weight : {0.0, -1.0, std::numeric_limits<double>::quiet_NaN(), HUGE_VAL}) {
    CAPTURE(weight);
    CHECK(contains(refusal([weight](auto p) { patch_sealed(p, kWeight, weight); }),
                   "is not a positive number"));
  }
  CHECK(contains(refusal([](auto p) { patch_sealed(p, kNx, std::uint64_t{1} << 62); }),
                 "do not match its header"));
  CHECK(contains(refusal([](auto p) { patch_sealed(p, 64, 'Z'); }), "not hexadecimal"));
  // Consistent, but not this model's size.
  store.save(sample_state(300));
  CHECK(contains(input_error_of([&] { store.load(300, 4); }),
                 name + "holds 3 state values and 3 velocities, this run keeps 4 and 4"));
  CHECK(contains(refusal([](auto p) { patch_sealed(p, kRank, std::uint32_t{7}); }),
                 "damaged checkpoint "));
}

TEST_CASE("an old version's checkpoint is refused as such") {
  sgp::testing::TempDir dir;
  CheckpointStore store(dir.path(), 0, kRunA);
  store.save(sample_state(10));
  std::string bytes = slurp(store.file(10));
  const std::uint32_t version = 1;
  std::memcpy(bytes.data() + 8, &version, sizeof version);
  write_bytes(store.file(10), bytes);
  CHECK(contains(input_error_of([&] { store.load(10); }),
                 "checkpoint-0-10.bin: a version 1 checkpoint, written by an older sgp"));
}

TEST_CASE("file names that are not checkpoints, or out of range, are ignored") {
  CHECK(parse_checkpoint_file_name("checkpoint-3-120.bin")->rank == 3);
  CHECK(parse_checkpoint_file_name("checkpoint-3-120.bin")->iteration == 120);
  CHECK(checkpoint_file_name(3, 120) == "checkpoint-3-120.bin");
  CHECK(parse_checkpoint_file_name(checkpoint_file_name(7, 4000000000))->iteration == 4000000000);
  for (const char* name :
       {"checkpoint-99999999999-1.bin", "checkpoint-1-99999999999999999999.bin",
        "checkpoint--1-5.bin", "checkpoint-1-+5.bin", "checkpoint-1.bin", "checkpoint-1-5.bin.tmp",
        "checkpoint-a-5.bin", "checkpoint-1-5-6.bin"}) {
    CAPTURE(name);
    CHECK_FALSE(parse_checkpoint_file_name(name).has_value());
  }
  sgp::testing::TempDir dir;
  CheckpointStore store(dir.path(), 1, kRunA);
  store.save(sample_state(10));
  write_bytes(dir / "checkpoint-99999999999-1.bin", "x");
  write_bytes(dir / "checkpoint-1-99999999999999999999.bin", "x");
  CHECK(store.available() == std::vector<std::int64_t>{10});
  CHECK(latest_complete_checkpoint(dir.path(), 2, kRunA) == std::nullopt);
}

TEST_CASE("a run prunes and resumes only its own checkpoints, never another run's") {
  sgp::testing::TempDir dir;
  CheckpointStore older(dir.path(), 0, kRunA), newer(dir.path(), 0, kRunB);
  for (std::int64_t it : {100, 200, 300}) older.save(sample_state(it));
  for (std::int64_t it : {10, 20, 30}) newer.save(sample_state(it));
  // The newer run pruned its own 10, kept the older run's higher-numbered files...
  CHECK(newer.available() == std::vector<std::int64_t>{20, 30});
  CHECK(older.available() == std::vector<std::int64_t>{200, 300});
  // ...and resuming it never picks them.
  CHECK(latest_complete_checkpoint(dir.path(), 1, kRunB) == 30);
  CHECK(latest_complete_checkpoint(dir.path(), 1, kRunA) == 300);
  CHECK(contains(input_error_of([&] { newer.load(300); }), "a checkpoint of run " + kRunA));
}

TEST_CASE("a checkpoint written with other fixed settings is refused, naming each") {
  sgp::testing::TempDir dir;
  CheckpointStore(dir.path(), 0, kRunA, {{"seed", 1}, {"batch_size", 32}, {"algo", "sgp"}})
      .save(sample_state(10));
  const CheckpointStore now(dir.path(), 0, kRunA, {{"seed", 2}, {"batch_size", 32}, {"peers", 4}});
  const auto error = input_error_of([&] { now.load(10); });
  CHECK(contains(error, "checkpoint-0-10.bin was written with other settings"));
  CHECK(contains(error, "seed: 1 then, 2 now"));
  CHECK(contains(error, "algo: \"sgp\" then, (none) now"));
  CHECK(contains(error, "peers: (none) then, 4 now"));
  CHECK_FALSE(contains(error, "batch_size"));
}

TEST_CASE("the newest complete checkpoint set is the newest iteration every rank has") {
  sgp::testing::TempDir dir;
  CheckpointState s;
  s.x = {1.0f};
  for (int rank = 0; rank < 3; ++rank) {
    CheckpointStore store(dir.path(), rank, kRunA);
    for (std::int64_t it : {10, 20}) {
      s.iteration = it;
      store.save(s);
    }
  }
  // Rank 2 died before writing iteration 30.
  for (int rank = 0; rank < 2; ++rank) {
    s.iteration = 30;
    CheckpointStore(dir.path(), rank, kRunA).save(s);
  }
  CHECK(latest_complete_checkpoint(dir.path(), 3, kRunA) == 20);
  CHECK(latest_complete_checkpoint(dir.path(), 4, kRunA) == std::nullopt);
  // A rank in the middle missing counts as much as the last one.
  sgp::testing::TempDir other;
  for (int rank = 0; rank < 3; ++rank) {
    s.iteration = 10;
    CheckpointStore(other.path(), rank, kRunA).save(s);
    if (rank == 1) continue;  // rank 1 died before writing iteration 20
    s.iteration = 20;
    CheckpointStore(other.path(), rank, kRunA).save(s);
  }
  CHECK(latest_complete_checkpoint(other.path(), 3, kRunA) == 10);
}
