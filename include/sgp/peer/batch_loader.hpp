#pragma once
// A peer's data: the shards of the training set, the training images of its own shard and the
// test set, and the loader that gathers the samples of a batch (by index) into backend memory,
// normalising their pixels.
#include <cstdint>
#include <filesystem>
#include <vector>

#include "sgp/compute/backend.hpp"
#include "sgp/compute/device_buffer.hpp"
#include "sgp/config/train_config.hpp"
#include "sgp/data/dataset.hpp"

namespace sgp::peer {

// Every peer's shard of `train` (by --partition and --seed; the same split on every peer).
std::vector<std::vector<std::size_t>> training_shards(const config::TrainConfig& config,
                                                      int num_peers, const data::Dataset& train);

// The training set's labels and the images of `rank`'s shard only (a peer of N holds about 1/N
// of the images), and the whole test set, from Fashion-MNIST in `dir`.
data::TrainTestSets load_peer_data(const config::TrainConfig& config, int rank, int num_peers,
                                   const std::filesystem::path& dir);

class BatchLoader {
 public:
  BatchLoader(compute::Backend& backend, const data::Dataset& set, int max_batch);
  // Copies the samples to the device; returns the batch size.
  int load(const std::vector<std::size_t>& indices);
  const float* images() const { return images_.data(); }
  const std::int32_t* labels() const { return labels_.data(); }

 private:
  const data::Dataset& set_;
  std::vector<float> host_images_;
  std::vector<std::int32_t> host_labels_;
  compute::DeviceBuffer<float> images_;
  compute::DeviceBuffer<std::int32_t> labels_;
};

}  // namespace sgp::peer
