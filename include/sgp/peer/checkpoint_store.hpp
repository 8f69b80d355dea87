#pragma once
// Checkpoints of one peer: push-sum state (x, w), optimizer state, data position and round, with
// the run they belong to and the settings a resume must keep. Each is written atomically
// (temporary file, fsync, rename), so a kill -9 at any moment leaves only whole checkpoints; a
// checksum over every byte catches a file damaged later.
//
// File: <dir>/checkpoint-<rank>-<iteration>.bin, little-endian, as written (version 2):
//   header (104 bytes): "SGPCKPT1" | u32 version | u32 rank | i64 iteration | i64 epoch |
//     u64 position | f64 weight | u64 n_x | u64 n_velocity | char[32] run id (hex) |
//     u64 settings_bytes
//   settings: settings_bytes of JSON (an object)
//   payload: n_x float32 (x), n_velocity float32 (velocity)
//   u64 FNV-1a 64 of every byte before it
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace sgp::peer {

struct CheckpointState {
  std::int64_t iteration = 0;  // iterations (and gossip rounds) completed
  std::int64_t epoch = 0;      // data sampler position
  std::uint64_t position = 0;
  double weight = 1.0;          // push-sum weight w
  std::vector<float> x;         // push-sum numerator, then further state (update_rule.hpp)
  std::vector<float> velocity;  // optimizer momentum buffer
};

class CheckpointStore {
 public:
  // run_id: the run this peer belongs to (run.json); only its checkpoints are listed as this
  // run's and pruned. settings: what a resume must keep (resume_settings.hpp), written into
  // every checkpoint and compared on load. keep: how many of this rank's newest checkpoints
  // survive pruning (>= 2, so that a set that some peers finished and others did not always has
  // an older complete one).
  CheckpointStore(std::filesystem::path dir, int rank, std::string run_id,
                  nlohmann::json settings = nlohmann::json::object(), int keep = 2);

  void save(const CheckpointState& state);
  // Iterations of this rank's checkpoint files, ascending, leaving out those whose header says
  // they belong to another run (files too damaged to tell are listed, so that load names them).
  std::vector<std::int64_t> available() const;
  // Reads and validates one: InputError "damaged checkpoint FILE: what" for any field out of
  // place (with `parameters`, the velocity must have that many values and x `state_values`, or
  // `parameters` too without it); InputError naming the file when it belongs to another run, was
  // written with other settings (naming each) or by an older sgp.
  CheckpointState load(std::int64_t iteration, std::optional<std::size_t> parameters = std::nullopt,
                       std::optional<std::size_t> state_values = std::nullopt) const;

  std::filesystem::path file(std::int64_t iteration) const;
  const std::filesystem::path& dir() const { return dir_; }
  const std::string& run_id() const { return run_id_; }

 private:
  enum class Owner { this_run, other_run, unknown };
  Owner owner(const std::filesystem::path& file) const;
  void prune() const;

  std::filesystem::path dir_;
  int rank_;
  std::string run_id_;
  nlohmann::json settings_;
  int keep_;
};

// The newest iteration for which every rank 0..num_peers-1 has a checkpoint of run `run_id` in
// `dir` (a shared directory, or one rank's: then only that rank can be complete).
std::optional<std::int64_t> latest_complete_checkpoint(const std::filesystem::path& dir,
                                                       int num_peers, const std::string& run_id);

}  // namespace sgp::peer
