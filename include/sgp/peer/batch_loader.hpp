#pragma once
// Gathers the samples of a batch (by index) into backend memory, normalising their pixels.
#include <cstdint>
#include <vector>

#include "sgp/compute/backend.hpp"
#include "sgp/compute/device_buffer.hpp"
#include "sgp/data/dataset.hpp"

namespace sgp::peer {

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
