#pragma once
// Test accuracy of a flat parameter buffer: the test set is evaluated in chunks with a
// forward-only network of the same model, each chunk's pixels normalised and uploaded as it
// comes (a peer holds the set as bytes, or reads them per chunk: Dataset::image_file).
#include <functional>
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
  // `set` must outlive the evaluator.
  Evaluator(compute::Backend& backend, const model::ModelSpec& model, const data::Dataset& set);
  // `between_chunks`, when given, runs after each chunk (a peer's engine keeps its neighbours
  // hearing from it during a long evaluation: Mixer::stay_heard).
  Evaluation evaluate(const float* params, const std::function<void()>& between_chunks = {});

  // 256 rows: the forward pass of a chunk is as fast per row as of 1000 (one GEMM each), and a
  // peer holds a quarter of the activations and normalised pixels.
  static constexpr int kChunk = 256;

 private:
  compute::Backend& backend_;
  const data::Dataset& set_;
  model::Network network_;
  std::vector<float> host_chunk_;       // one chunk's normalised images
  compute::DeviceBuffer<float> chunk_;  // the same on the backend
  compute::DeviceBuffer<std::int32_t> labels_;
};

}  // namespace sgp::model
