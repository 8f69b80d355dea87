#pragma once
// Test accuracy of a flat parameter buffer: the test set is uploaded once, then evaluated in
// large chunks with a forward-only network of the same model.
#include <vector>

#include "sgp/compute/backend.hpp"
#include "sgp/compute/device_buffer.hpp"
#include "sgp/data/dataset.hpp"
#include "sgp/model/network.hpp"

namespace sgp::model {

// The shape of one sample of a data set (height x width x 1 channel).
model::Shape input_shape(const data::Dataset& set);

struct Evaluation {
  double accuracy = 0.0;  // fraction in [0, 1]
  double loss = 0.0;      // mean cross-entropy
};

class Evaluator {
 public:
  Evaluator(compute::Backend& backend, const model::ModelSpec& model, const data::Dataset& set);
  Evaluation evaluate(const float* params);

 private:
  static constexpr int kChunk = 1000;
  compute::Backend& backend_;
  model::Network network_;
  compute::DeviceBuffer<float> images_;
  compute::DeviceBuffer<std::int32_t> labels_;
  int features_;
};

}  // namespace sgp::model
