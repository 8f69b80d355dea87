#pragma once
// Test accuracy of a flat parameter buffer: the test set is uploaded once, then evaluated in
// large chunks with a network of the same widths.
#include <vector>

#include "sgp/compute/backend.hpp"
#include "sgp/compute/device_buffer.hpp"
#include "sgp/data/dataset.hpp"
#include "sgp/model/mlp.hpp"

namespace sgp::peer {

// The MLP's layer widths for a data set: its features, the hidden widths, its classes.
std::vector<int> mlp_widths(const std::vector<int>& hidden, const data::Dataset& set);

struct Evaluation {
  double accuracy = 0.0;  // fraction in [0, 1]
  double loss = 0.0;      // mean cross-entropy
};

class Evaluator {
 public:
  Evaluator(compute::Backend& backend, const std::vector<int>& widths, const data::Dataset& set);
  Evaluation evaluate(const float* params);

 private:
  static constexpr int kChunk = 1000;
  compute::Backend& backend_;
  model::Mlp mlp_;
  compute::DeviceBuffer<float> images_;
  compute::DeviceBuffer<std::int32_t> labels_;
  int features_;
};

}  // namespace sgp::peer
