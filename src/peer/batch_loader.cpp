#include "sgp/peer/batch_loader.hpp"

#include "sgp/data/partition.hpp"
#include "sgp/error.hpp"

namespace sgp::peer {

std::vector<std::vector<std::size_t>> training_shards(const config::TrainConfig& config,
                                                      int num_peers, const data::Dataset& train) {
  return data::make_partition(train.labels, train.num_classes, num_peers,
                              data::parse_partition_spec(config.partition), config.seed);
}

data::TrainTestSets load_peer_data(const config::TrainConfig& config, int rank, int num_peers,
                                   const std::filesystem::path& dir) {
  data::TrainTestSets sets{data::load_fashion_mnist_shard(dir, "train",
                                                          [&](const data::Dataset& labels) {
                                                            return training_shards(
                                                                config, num_peers, labels)[rank];
                                                          }),
                           data::load_fashion_mnist_streamed(dir, "t10k")};
  data::check_same_image_size(sets.train, sets.test, dir.string());
  return sets;
}

BatchLoader::BatchLoader(compute::Backend& backend, const data::Dataset& set, int max_batch)
    : set_(set),
      host_images_(static_cast<std::size_t>(max_batch) * set.features()),
      host_labels_(max_batch),
      images_(backend, host_images_.size()),
      labels_(backend, host_labels_.size()) {}

int BatchLoader::load(const std::vector<std::size_t>& indices) {
  SGP_ENFORCE(indices.size() <= host_labels_.size(), "batch of {} exceeds the maximum {}",
              indices.size(), host_labels_.size());
  const auto features = static_cast<std::size_t>(set_.features());
  for (std::size_t r = 0; r < indices.size(); ++r) {
    data::normalise_images(set_.image(indices[r]), features, host_images_.data() + r * features);
    host_labels_[r] = set_.labels[indices[r]];
  }
  const auto n = indices.size();
  images_.upload(std::span<const float>(host_images_.data(), n * features));
  labels_.upload(std::span<const std::int32_t>(host_labels_.data(), n));
  return static_cast<int>(n);
}

}  // namespace sgp::peer
