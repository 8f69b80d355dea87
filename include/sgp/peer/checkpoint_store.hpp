#pragma once
// Checkpoints of one peer: push-sum state (x, w), optimizer state, data position and round.
// Each is written atomically (temporary file, fsync, rename), so a kill -9 at any moment leaves
// only whole checkpoints; a checksum catches a file damaged later.
//
// File: <dir>/checkpoint-<rank>-<iteration>.bin
//   "SGPCKPT1" | u32 version | u32 rank | i64 iteration | i64 epoch | u64 position |
//   f64 weight | u64 n_x | u64 n_velocity | u64 checksum (FNV-1a 64 of the payload) |
//   payload: n_x float32 (x), n_velocity float32 (velocity); little-endian, as written.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

namespace sgp::peer {

struct CheckpointState {
  std::int64_t iteration = 0;  // iterations (and gossip rounds) completed
  std::int64_t epoch = 0;      // data sampler position
  std::uint64_t position = 0;
  double weight = 1.0;          // push-sum weight w
  std::vector<float> x;         // push-sum numerator
  std::vector<float> velocity;  // optimizer momentum buffer
};

class CheckpointStore {
 public:
  // keep: how many of this rank's newest checkpoints survive pruning (>= 2, so that a set that
  // some peers finished and others did not always has an older complete one).
  CheckpointStore(std::filesystem::path dir, int rank, int keep = 2);

  void save(const CheckpointState& state);
  // Iterations of this rank's checkpoint files, ascending (files are not validated here).
  std::vector<std::int64_t> available() const;
  // Reads and validates one; InputError naming the file and the problem when damaged.
  CheckpointState load(std::int64_t iteration) const;

  std::filesystem::path file(std::int64_t iteration) const;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  int rank_;
  int keep_;
};

// The newest iteration for which every rank 0..num_peers-1 has a checkpoint in `dir`.
std::optional<std::int64_t> latest_complete_checkpoint(const std::filesystem::path& dir,
                                                       int num_peers);

}  // namespace sgp::peer
