#include "sgp/data/dataset.hpp"

#include <cstdlib>
#include <utility>

#include <fmt/format.h>
#include <fmt/std.h>

#include "sgp/data/idx_cache.hpp"
#include "sgp/data/idx_file.hpp"
#include "sgp/error.hpp"
#include "sgp_config.h"

namespace sgp::data {

namespace {

// Prefers the gzip file the Debian package ships; accepts an uncompressed one too.
std::filesystem::path find_file(const std::filesystem::path& dir, const std::string& name) {
  const auto gz = dir / (name + ".gz");
  const auto plain = dir / name;
  std::error_code ec;
  if (std::filesystem::exists(gz, ec)) return gz;
  if (std::filesystem::exists(plain, ec)) return plain;
  return gz;  // read_idx_u8 reports it missing
}

struct SplitFiles {
  std::filesystem::path images, labels;
};

SplitFiles split_files(const std::filesystem::path& dir, const std::string& split) {
  if (split != "train" && split != "t10k") {
    throw InputError(fmt::format("unknown split '{}' (expected train or t10k)", split));
  }
  return {find_file(dir, split + "-images-idx3-ubyte"),
          find_file(dir, split + "-labels-idx1-ubyte")};
}

void check_shapes(const std::vector<std::uint32_t>& image_dims,
                  const std::vector<std::uint32_t>& label_dims, const std::string& where) {
  if (image_dims.size() != 3 || label_dims.size() != 1) {
    throw InputError(fmt::format("{}: expected images [n, rows, cols] and labels [n]", where));
  }
  if (image_dims[0] != label_dims[0]) {
    throw InputError(
        fmt::format("{}: {} images but {} labels", where, image_dims[0], label_dims[0]));
  }
  if (image_dims[0] == 0 || image_dims[1] == 0 || image_dims[2] == 0) {
    throw InputError(fmt::format("{}: empty data set ({} x {} x {})", where, image_dims[0],
                                 image_dims[1], image_dims[2]));
  }
}

std::vector<std::int32_t> checked_labels(const std::vector<std::uint8_t>& labels, int num_classes,
                                         const std::string& where) {
  std::vector<std::int32_t> checked(labels.size());
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] >= num_classes) {
      throw InputError(fmt::format("{}: label {} of sample {} is outside 0..{}", where, labels[i],
                                   i, num_classes - 1));
    }
    checked[i] = labels[i];
  }
  return checked;
}

}  // namespace

std::filesystem::path resolve_data_dir(const std::string& flag_value) {
  if (!flag_value.empty()) return flag_value;
  if (const char* env = std::getenv("SGP_DATA_DIR"); env && *env) return env;
  return SGP_DEFAULT_DATA_DIR;
}

void normalise_images(const std::uint8_t* pixels, std::size_t count, float* out) {
  const float scale = 1.0f / (255.0f * kFashionMnistStd);
  const float shift = kFashionMnistMean / kFashionMnistStd;
  for (std::size_t i = 0; i < count; ++i) out[i] = pixels[i] * scale - shift;
}

const std::uint8_t* Dataset::image(std::size_t i) const {
  SGP_ENFORCE(!image_file, "sample {}: this data set's images are read per chunk", i);
  const auto features = static_cast<std::size_t>(this->features());
  if (held_row.empty()) return pixels.data() + i * features;
  SGP_ENFORCE(i < size() && held_row[i] != kNotHeld, "sample {} is not in this peer's shard", i);
  return pixels.data() + static_cast<std::size_t>(held_row[i]) * features;
}

void Dataset::normalised_images(std::size_t first, std::size_t count, float* out) const {
  SGP_ENFORCE(first + count <= size(), "images {}..{} of a data set of {}", first, first + count,
              size());
  const auto features = static_cast<std::size_t>(this->features());
  if (image_file) {
    std::vector<std::uint8_t> bytes(count * features);
    image_file->read_items(first, count, bytes.data());
    return normalise_images(bytes.data(), bytes.size(), out);
  }
  if (held_row.empty()) return normalise_images(image(first), count * features, out);
  for (std::size_t i = 0; i < count; ++i)
    normalise_images(image(first + i), features, out + i * features);
}

Dataset make_dataset(const std::vector<std::uint32_t>& image_dims, std::vector<std::uint8_t> pixels,
                     const std::vector<std::uint32_t>& label_dims,
                     const std::vector<std::uint8_t>& labels, int num_classes,
                     const std::string& where) {
  check_shapes(image_dims, label_dims, where);
  SGP_ENFORCE(pixels.size() == std::size_t{image_dims[0]} * image_dims[1] * image_dims[2],
              "{}: {} pixels for {} x {} x {} images", where, pixels.size(), image_dims[0],
              image_dims[1], image_dims[2]);
  Dataset set;
  set.rows = static_cast<int>(image_dims[1]);
  set.cols = static_cast<int>(image_dims[2]);
  set.num_classes = num_classes;
  set.labels = checked_labels(labels, num_classes, where);
  set.pixels = std::move(pixels);
  return set;
}

Dataset load_fashion_mnist(const std::filesystem::path& dir, const std::string& split) {
  const auto [images_path, labels_path] = split_files(dir, split);
  IdxArray images = read_idx_u8(images_path, 3);
  const IdxArray labels = read_idx_u8(labels_path, 1);
  return make_dataset(images.dims, std::move(images.values), labels.dims, labels.values,
                      kFashionMnistClasses, fmt::format("{} and {}", images_path, labels_path));
}

Dataset load_fashion_mnist_streamed(const std::filesystem::path& dir, const std::string& split) {
  const auto [images_path, labels_path] = split_files(dir, split);
  std::shared_ptr<const IdxItemFile> images =
      IdxItemFile::open(cached_copy(images_path).value_or(images_path), 3);
  if (!images) return load_fashion_mnist(dir, split);
  const IdxArray labels = read_idx_u8(labels_path, 1);
  const auto where = fmt::format("{} and {}", images_path, labels_path);
  check_shapes(images->dims(), labels.dims, where);
  Dataset set;
  set.rows = static_cast<int>(images->dims()[1]);
  set.cols = static_cast<int>(images->dims()[2]);
  set.num_classes = kFashionMnistClasses;
  set.labels = checked_labels(labels.values, set.num_classes, where);
  set.image_file = std::move(images);
  return set;
}

Dataset load_fashion_mnist_shard(
    const std::filesystem::path& dir, const std::string& split,
    const std::function<std::vector<std::size_t>(const Dataset& labels_only)>& samples) {
  const auto [images_path, labels_path] = split_files(dir, split);
  const auto where = fmt::format("{} and {}", images_path, labels_path);
  const IdxArray labels = read_idx_u8(labels_path, 1);
  Dataset set;
  set.num_classes = kFashionMnistClasses;
  set.labels = checked_labels(labels.values, set.num_classes, where);
  std::vector<bool> keep(set.size());
  for (std::size_t i : samples(set)) {
    SGP_ENFORCE(i < keep.size(), "sample {} of a split of {}", i, keep.size());
    keep[i] = true;
  }
  IdxArray images = read_idx_u8_items(images_path, 3, keep);
  check_shapes(images.dims, labels.dims, where);
  set.rows = static_cast<int>(images.dims[1]);
  set.cols = static_cast<int>(images.dims[2]);
  set.pixels = std::move(images.values);
  set.held_row.assign(set.size(), Dataset::kNotHeld);
  std::int32_t row = 0;
  for (std::size_t i = 0; i < keep.size(); ++i)
    if (keep[i]) set.held_row[i] = row++;
  return set;
}

std::size_t fashion_mnist_size(const std::filesystem::path& dir, const std::string& split) {
  return read_idx_u8(find_file(dir, split + "-labels-idx1-ubyte"), 1).values.size();
}

void check_same_image_size(const Dataset& train, const Dataset& test, const std::string& where) {
  if (train.rows != test.rows || train.cols != test.cols) {
    throw InputError(fmt::format(
        "{}: the training images are {} x {} pixels but the test images are {} x {}; both splits "
        "must have images of one size",
        where, train.rows, train.cols, test.rows, test.cols));
  }
}

TrainTestSets load_fashion_mnist_train_test(const std::filesystem::path& dir) {
  TrainTestSets sets{load_fashion_mnist(dir, "train"), load_fashion_mnist(dir, "t10k")};
  check_same_image_size(sets.train, sets.test, dir.string());
  return sets;
}

}  // namespace sgp::data
