#include "sgp/model/evaluator.hpp"

#include <algorithm>

namespace sgp::model {

model::Shape input_shape(const data::Dataset& set) { return {set.rows, set.cols, 1}; }

Evaluator::Evaluator(compute::Backend& backend, const model::ModelSpec& model,
                     const data::Dataset& set)
    : backend_(backend),
      set_(set),
      network_(backend, model, input_shape(set), set.num_classes, kChunk, false),
      host_chunk_(static_cast<std::size_t>(std::min<std::size_t>(kChunk, set.size())) *
                  set.features()),
      chunk_(backend, host_chunk_.size()),
      labels_(backend, std::span<const std::int32_t>(set.labels)) {}

Evaluation Evaluator::evaluate(const float* params, const std::function<void()>& between_chunks) {
  const auto n = static_cast<int>(labels_.size());
  std::int64_t correct = 0;
  double loss = 0.0;
  for (int begin = 0; begin < n; begin += kChunk) {
    const int rows = std::min(kChunk, n - begin);
    const auto values = static_cast<std::size_t>(rows) * set_.features();
    set_.normalised_images(begin, rows, host_chunk_.data());
    chunk_.upload(std::span<const float>(host_chunk_.data(), values));
    const float* logits = network_.forward(params, chunk_.data(), rows);
    const std::int32_t* labels = labels_.data() + begin;
    const int classes = network_.num_classes();
    correct += backend_.count_correct(logits, labels, rows, classes);
    loss += rows * backend_.softmax_cross_entropy(logits, labels, rows, classes, nullptr);
    if (between_chunks) between_chunks();
  }
  return {static_cast<double>(correct) / n, loss / n};
}

}  // namespace sgp::model
