// Data sets held as pixel bytes and normalised per batch: the batch loader and the evaluator
// hand the model exactly the floats of the float32 copy every peer used to hold (normalised once
// at load time), so training and accuracies are unchanged bit for bit.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <doctest/doctest.h>

#include "sgp/compute/cpu_backend.hpp"
#include "sgp/data/dataset.hpp"
#include "sgp/model/evaluator.hpp"
#include "sgp/model/model_spec.hpp"
#include "sgp/model/network.hpp"
#include "sgp/peer/batch_loader.hpp"

using namespace sgp;

namespace {

// The float32 images as make_dataset wrote them before data sets kept bytes.
std::vector<float> float32_images(const std::vector<std::uint8_t>& pixels) {
  std::vector<float> images(pixels.size());
  const float scale = 1.0f / (255.0f * data::kFashionMnistStd);
  const float shift = data::kFashionMnistMean / data::kFashionMnistStd;
  for (std::size_t i = 0; i < pixels.size(); ++i) images[i] = pixels[i] * scale - shift;
  return images;
}

bool same_bits(const float* a, const float* b, std::size_t count) {
  return std::memcmp(a, b, count * sizeof(float)) == 0;
}

// n random 5 x 5 images (bytes) with labels in 0..9.
data::Dataset random_set(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint8_t> pixels(n * 25), labels(n);
  for (auto& p : pixels) p = static_cast<std::uint8_t>(rng() % 256);
  for (auto& l : labels) l = static_cast<std::uint8_t>(rng() % 10);
  return data::make_dataset({static_cast<std::uint32_t>(n), 5, 5}, pixels,
                            {static_cast<std::uint32_t>(n)}, labels, 10, "random");
}

}  // namespace

TEST_CASE("every pixel byte normalises to the float32 value of the old copy, bit for bit") {
  std::vector<std::uint8_t> bytes(256);
  for (int b = 0; b < 256; ++b) bytes[b] = static_cast<std::uint8_t>(b);
  std::vector<float> converted(256);
  data::normalise_images(bytes.data(), bytes.size(), converted.data());
  CHECK(same_bits(converted.data(), float32_images(bytes).data(), 256));
  CHECK(converted[0] < 0.0f);
  CHECK(converted[255] > converted[254]);
}

TEST_CASE("a batch converted on the fly equals the batch gathered from the float32 copy") {
  compute::CpuBackend backend(1);
  const auto set = random_set(40, 1);
  const auto old_images = float32_images(set.pixels);
  peer::BatchLoader loader(backend, set, 8);
  const std::vector<std::size_t> batch{39, 0, 17, 17, 5};  // any order, repeats allowed
  REQUIRE(loader.load(batch) == 5);
  for (std::size_t r = 0; r < batch.size(); ++r) {
    CAPTURE(r);
    CHECK(same_bits(loader.images() + r * 25, old_images.data() + batch[r] * 25, 25));
    CHECK(loader.labels()[r] == set.labels[batch[r]]);
  }
}

namespace {

// The evaluation of the old Evaluator: the whole float32 test set, in the evaluator's chunks.
model::Evaluation evaluate_float32(compute::Backend& backend, const model::ModelSpec& spec,
                                   const data::Dataset& set, const float* params) {
  constexpr int kChunk = model::Evaluator::kChunk;
  model::Network network(backend, spec, model::input_shape(set), 10, kChunk, false);
  const auto images = float32_images(set.pixels);
  const int n = static_cast<int>(set.size());
  std::int64_t correct = 0;
  double loss = 0.0;
  for (int begin = 0; begin < n; begin += kChunk) {
    const int rows = std::min(kChunk, n - begin);
    const float* logits = network.forward(params, images.data() + begin * set.features(), rows);
    const std::int32_t* labels = set.labels.data() + begin;
    correct += backend.count_correct(logits, labels, rows, 10);
    loss += rows * backend.softmax_cross_entropy(logits, labels, rows, 10, nullptr);
  }
  return {static_cast<double>(correct) / n, loss / n};
}

}  // namespace

TEST_CASE(
    "the evaluator's accuracy and loss equal those of the whole float32 test set; it calls back "
    "after each chunk") {
  compute::CpuBackend backend(1);
  const auto set = random_set(2 * model::Evaluator::kChunk + 44, 2);  // two chunks and 44 rows
  const auto spec = model::parse_model_spec("mlp:7");
  model::Evaluator evaluator(backend, spec, set);
  std::vector<float> params(
      model::Network(backend, spec, model::input_shape(set), 10, 1, false).parameter_count());
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  for (auto& p : params) p = normal(rng);

  const auto expected = evaluate_float32(backend, spec, set, params.data());
  int chunks = 0;  // a peer's engine stays heard between chunks (Mixer::stay_heard)
  const auto result = evaluator.evaluate(params.data(), [&chunks] { ++chunks; });
  CHECK(result.accuracy == expected.accuracy);
  CHECK(result.loss == expected.loss);
  CHECK(result.accuracy > 0.0);
  CHECK(chunks == 3);
}
