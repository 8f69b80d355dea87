// Claiming a run directory: a new run refuses another run's results, --overwrite deletes only
// sgp's files, --resume keeps them; the run id in run.json is shared by the run's ranks.
#include <sys/resource.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "sgp/error.hpp"
#include "sgp/run/model_file.hpp"
#include "sgp/run/run_directory.hpp"
#include "sgp/run/run_files.hpp"
#include "support/input_error.hpp"
#include "support/temp_dir.hpp"
#include "support/text.hpp"

using namespace sgp::run;
using sgp::testing::contains;
using sgp::testing::input_error_of;

namespace {

// The files a finished 2-peer launch leaves, plus a user's own note.
void finished_run(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir / "checkpoints");
  for (const char* name :
       {"config.json", "run.json", "summary.json", "peer-0.jsonl", "peer-1.jsonl",
        "peer-0-summary.json", "peer-1-summary.json", "peer-0.log",
        "checkpoints/checkpoint-0-20.bin", "checkpoints/checkpoint-1-20.bin", "notes.txt"}) {
    std::ofstream(dir / name) << "{\"run_id\": \"0123\"}";
  }
}

}  // namespace

TEST_CASE("a new run refuses a directory that holds another run's results") {
  sgp::testing::TempDir dir;
  finished_run(dir.path());
  const auto error = input_error_of([&] { claim_run_directory(dir.path(), {}); });
  CHECK(contains(error, "run directory " + dir.path().string()));
  CHECK(contains(error, "holds another run's results (checkpoints/checkpoint-0-20.bin"));
  CHECK(contains(error, "give --resume to continue that run, --overwrite to delete them first"));
  CHECK_FALSE(contains(input_error_of([&] {
                         claim_run_directory(dir.path(), {RunStart::fresh, {}, false});
                       }),
                       "--resume"));
  // A rank's claim looks at that rank's files only; a launcher's log of the rank is not one.
  CHECK(contains(input_error_of([&] {
                   claim_run_directory(dir.path(), {RunStart::fresh, {1}});
                 }),
                 "peer-1-summary.json"));
  sgp::testing::TempDir other;
  std::ofstream(other / "peer-3.log") << "started by a launcher";
  std::ofstream(other / "sweep-point.json") << "{}";
  CHECK_NOTHROW(claim_run_directory(other.path(), {RunStart::fresh, {3}}));
}

TEST_CASE("--overwrite deletes sgp's results and nothing else; --resume keeps them") {
  sgp::testing::TempDir dir;
  finished_run(dir.path());
  const std::string resumed = claim_run_directory(dir.path(), {RunStart::resume, {0}});
  CHECK(resumed == "0123");
  CHECK(result_files(dir.path(), {}).size() == 10u);

  const std::string id = claim_run_directory(dir.path(), {RunStart::overwrite, {}});
  CHECK(id.size() == 32u);
  CHECK(id != "0123");
  CHECK(result_files(dir.path(), {}) ==
        std::vector<std::filesystem::path>{dir.path() / "run.json"});
  CHECK(std::filesystem::exists(dir / "notes.txt"));
}

TEST_CASE("the ranks of a run share the run id its first claim wrote") {
  sgp::testing::TempDir dir;
  const std::string first = claim_run_directory(dir.path(), {RunStart::fresh, {1}});
  CHECK(claim_run_directory(dir.path(), {RunStart::fresh, {0}}) == first);
  RunDirectory run(dir.path(), 2);
  run.claim({RunStart::fresh, {2}});
  CHECK(run.run_id() == first);
  // A whole-run claim starts a new run.
  sgp::testing::TempDir fresh;
  const std::string a = claim_run_directory(fresh.path(), {});
  CHECK(claim_run_directory(fresh.path(), {RunStart::overwrite, {}}) != a);
}

TEST_CASE("ranks that claim a fresh directory at once all adopt one run id") {
  // The ranks of one host (and in-process peers) claim the same directory at the same moment; a
  // rank that saw no run.json and then found one must read it, not call it unreadable.
  for (int attempt = 0; attempt < 500; ++attempt) {
    sgp::testing::TempDir dir;
    std::vector<std::string> ids(8);
    std::vector<std::string> errors(8);
    std::vector<std::thread> ranks;
    for (int rank = 0; rank < 8; ++rank) {
      ranks.emplace_back([&, rank] {
        try {
          ids[rank] = claim_run_directory(dir.path(), {RunStart::fresh, {rank}});
        } catch (const std::exception& e) {
          errors[rank] = e.what();
        }
      });
    }
    for (auto& rank : ranks) rank.join();
    for (int rank = 0; rank < 8; ++rank) {
      INFO("attempt ", attempt, " rank ", rank);
      REQUIRE(errors[rank] == "");
      REQUIRE(ids[rank] == ids[0]);
    }
  }
  // A damaged marker is still refused, naming the file.
  sgp::testing::TempDir damaged;
  std::ofstream(damaged / "run.json") << "{\"run_";
  CHECK(contains(input_error_of([&] {
                   claim_run_directory(damaged.path(), {RunStart::fresh, {0}});
                 }),
                 "run.json\": not the JSON of a run marker"));
}

TEST_CASE("a run is finished when every rank wrote its summary") {
  sgp::testing::TempDir dir;
  finished_run(dir.path());
  std::ofstream(dir / "peer-0-summary.json") << "{}";
  std::ofstream(dir / "peer-1-summary.json") << "{}";
  CHECK(ranks_finished(dir.path(), {0, 1}));
  CHECK_FALSE(ranks_finished(dir.path(), {0, 1, 2}));
}

TEST_CASE("a model file reads back exactly; a damaged or mismatched one is refused, named") {
  sgp::testing::TempDir dir;
  const auto file = dir / "peer-0-model.bin";
  sgp::run::ModelFile model{"mlp:4", std::vector<float>(3190)};  // 784*4 + 4 + 4*10 + 10
  for (std::size_t k = 0; k < model.parameters.size(); ++k) {
    model.parameters[k] = 0.001f * static_cast<float>(k) - 1.0f;
  }
  sgp::run::write_model_file(file, model);
  const auto back = sgp::run::read_model_file(file);
  CHECK(back.model == "mlp:4");
  CHECK(back.parameters == model.parameters);
  // 8 magic + 4 version + 4 length + 5 spec + 8 count + 4 * 3190 + 8 checksum.
  CHECK(std::filesystem::file_size(file) == 37 + 4 * 3190);

  std::string bytes = sgp::testing::slurp(file);
  bytes[100] ^= 1;
  std::ofstream(file, std::ios::binary) << bytes;
  CHECK(
      sgp::testing::contains(sgp::testing::input_error_of([&] { sgp::run::read_model_file(file); }),
                             "peer-0-model.bin: not an sgp model file: damaged (checksum)"));
  model.parameters.pop_back();
  sgp::run::write_model_file(file, model);
  CHECK(
      sgp::testing::contains(sgp::testing::input_error_of([&] { sgp::run::read_model_file(file); }),
                             "3189 parameters, but model 'mlp:4' has 3190"));
}

TEST_CASE("a model file with a NaN parameter and a valid checksum is refused, named") {
  sgp::testing::TempDir dir;
  const auto file = dir / "peer-1-model.bin";
  sgp::run::ModelFile model{"mlp:4", std::vector<float>(3190, 0.5f)};
  model.parameters[17] = std::numeric_limits<float>::quiet_NaN();
  sgp::run::write_model_file(file, model);  // its checksum covers the NaN: it is the writer's
  CHECK(input_error_of([&] { sgp::run::read_model_file(file); }) ==
        file.string() +
            ": parameter 17 of 3190 is nan, not a finite number: the model cannot be "
            "evaluated");
}

namespace {

// The names in `dir` (and dir/checkpoints) of temporary files of atomic writes.
std::vector<std::string> temporary_files(const std::filesystem::path& dir) {
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (temporary_file_target(entry.path().filename().string())) {
      found.push_back(entry.path().filename().string());
    }
  }
  return found;
}

// Lowers this process's file size limit for one scope: a write beyond it fails with EFBIG (the
// signal it would raise is ignored meanwhile), as a full disk fails one with ENOSPC.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &saved_);
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit lowered = saved_;
    lowered.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &lowered);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit saved_{};
  void (*old_handler_)(int) = nullptr;
};

}  // namespace

TEST_CASE("a failed atomic write names the file and errno and leaves no temporary file") {
  sgp::testing::TempDir dir;
  const auto file = dir / "peer-0-summary.json";
  std::string message;
  {
    FileSizeLimit limit(100);
    try {
      write_file_atomically(file, std::string(1000, 'x'));
    } catch (const sgp::IoError& e) {
      message = e.what();
    }
  }
  CHECK(message == "\"" + file.string() + "\": cannot write: File too large (EFBIG)");
  CHECK(temporary_files(dir.path()).empty());
  CHECK_FALSE(std::filesystem::exists(file));
  // Renaming onto a directory fails after the temporary file is complete: removed too.
  std::filesystem::create_directories(dir / "busy" / "inside");
  CHECK_THROWS_AS(write_file_atomically(dir / "busy", "{}"), sgp::IoError);
  CHECK(temporary_files(dir.path()).empty());
  write_file_atomically(file, "{}\n");  // and the next write succeeds
  CHECK(sgp::testing::slurp(file) == "{}\n");
}

TEST_CASE("temporary files a killed writer left are removed by the claim of their scope") {
  sgp::testing::TempDir dir;
  std::filesystem::create_directories(dir / "checkpoints");
  const std::string tag = "0123456789abcdef-3.tmp";
  for (const std::string& name :
       {"." + std::string("peer-0-summary.json.") + tag, ".peer-1-model.bin." + tag,
        ".config.json." + tag, "checkpoints/.checkpoint-1-20.bin." + tag, ".notes.txt." + tag}) {
    std::ofstream(dir / name) << "half";
  }
  CHECK(temporary_file_target(".peer-1-model.bin." + tag) == "peer-1-model.bin");
  CHECK_FALSE(temporary_file_target(".peer-1-model.bin.tmp"));
  CHECK_FALSE(temporary_file_target("peer-1-model.bin." + tag));
  // Rank 1's claim removes rank 1's; the whole run's claim the rest of sgp's, never a user's.
  CHECK(remove_temporary_files(dir.path(), {1}) == 2);
  CHECK(temporary_files(dir.path()).size() == 3);
  claim_run_directory(dir.path(), {RunStart::resume, {}});
  CHECK(temporary_files(dir.path()) == std::vector<std::string>{".notes.txt." + tag});
}
