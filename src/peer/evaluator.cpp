#include "sgp/peer/evaluator.hpp"

#include <algorithm>

#include "sgp/error.hpp"

namespace sgp::peer {

std::vector<int> mlp_widths(const std::vector<int>& hidden, const data::Dataset& set) {
  std::vector<int> widths = {set.features()};
  widths.insert(widths.end(), hidden.begin(), hidden.end());
  widths.push_back(set.num_classes);
  return widths;
}

Evaluator::Evaluator(compute::Backend& backend, const std::vector<int>& widths,
                     const data::Dataset& set)
    : backend_(backend),
      mlp_(backend, widths, kChunk),
      images_(backend, std::span<const float>(set.images)),
      labels_(backend, std::span<const std::int32_t>(set.labels)),
      features_(set.features()) {
  // A model for other images would read past each image (callers check this as InputError).
  SGP_ENFORCE(!widths.empty() && widths.front() == features_,
              "the model takes {} inputs but the evaluation images have {} pixels",
              widths.empty() ? 0 : widths.front(), features_);
}

Evaluation Evaluator::evaluate(const float* params) {
  const auto n = static_cast<int>(labels_.size());
  std::int64_t correct = 0;
  double loss = 0.0;
  for (int begin = 0; begin < n; begin += kChunk) {
    const int rows = std::min(kChunk, n - begin);
    const float* logits =
        mlp_.forward(params, images_.data() + static_cast<std::size_t>(begin) * features_, rows);
    const std::int32_t* labels = labels_.data() + begin;
    correct += backend_.count_correct(logits, labels, rows, mlp_.num_classes());
    loss +=
        rows * backend_.softmax_cross_entropy(logits, labels, rows, mlp_.num_classes(), nullptr);
  }
  return {static_cast<double>(correct) / n, loss / n};
}

}  // namespace sgp::peer
