#pragma once
// An image-classification data set in memory, its pixels kept as the files' bytes (a quarter of
// float32) and normalised when a batch or an evaluation chunk is converted (normalise_images).
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace sgp::data {

class IdxItemFile;

// Fashion-MNIST statistics (the training set's pixel mean and standard deviation): pixel/255,
// then (p - mean) / std.
inline constexpr float kFashionMnistMean = 0.2860f;
inline constexpr float kFashionMnistStd = 0.3530f;

struct Dataset {
  int rows = 0, cols = 0;  // image height and width
  int num_classes = 0;
  std::vector<std::uint8_t> pixels;  // the held images' bytes 0..255, row-major
  std::vector<std::int32_t> labels;  // of every sample
  // Where sample i's image is in `pixels`: empty when every image is held, in order (a whole
  // split); else its row, or kNotHeld for a sample of another peer's shard.
  std::vector<std::int32_t> held_row;
  static constexpr std::int32_t kNotHeld = -1;
  // Set when the images are not held but read from this file per chunk (normalised_images):
  // `pixels` is empty then, and image() refuses.
  std::shared_ptr<const IdxItemFile> image_file;

  std::size_t size() const { return labels.size(); }
  int features() const { return rows * cols; }
  // Sample i's image; InvariantError when it is not held.
  const std::uint8_t* image(std::size_t i) const;
  // Writes images [first, first + count) normalised to `out` (count * features() floats).
  void normalised_images(std::size_t first, std::size_t count, float* out) const;
};

// (pixel / 255 - mean) / std for `count` pixels, computed as pixel * scale - shift in float: the
// values every model of sgp has been trained on, bit for bit.
void normalise_images(const std::uint8_t* pixels, std::size_t count, float* out);
inline constexpr int kFashionMnistClasses = 10;
inline constexpr int kFashionMnistSide = 28;  // images are 28 x 28

// An empty Dataset with Fashion-MNIST's image size and classes: the shape a model is built for,
// where the model's size is needed without the data (sweep planning, topology traffic figures).
inline Dataset fashion_mnist_shape() {
  Dataset shape;
  shape.rows = shape.cols = kFashionMnistSide;
  shape.num_classes = kFashionMnistClasses;
  return shape;
}

// The data directory: `flag_value` if not empty, else $SGP_DATA_DIR, else the Debian package's
// /usr/share/datasets/fashion-mnist.
std::filesystem::path resolve_data_dir(const std::string& flag_value);

// Loads "<dir>/<split>-images-idx3-ubyte[.gz]" and "<dir>/<split>-labels-idx1-ubyte[.gz]",
// split = "train" or "t10k". Checks that counts match and labels are in 0..9.
Dataset load_fashion_mnist(const std::filesystem::path& dir, const std::string& split);

// A split's labels, its images read per chunk from the uncompressed file (the split's decompressed
// copy in the cache, idx_cache.hpp, or a plain file): every peer of a host evaluates on the same
// test set, which the page cache then holds once. Where there is only the gzip file, the images
// are held as load_fashion_mnist holds them (and the cache's copy written for the next run).
Dataset load_fashion_mnist_streamed(const std::filesystem::path& dir, const std::string& split);

// A split's labels and, of its images, only those of `samples` (a peer's shard, indices into
// the labels): `samples` is given the labels (all of them) and returns the samples to hold.
// The images file is read one image at a time, so a peer never holds the whole split.
Dataset load_fashion_mnist_shard(
    const std::filesystem::path& dir, const std::string& split,
    const std::function<std::vector<std::size_t>(const Dataset& labels_only)>& samples);

// The number of examples of a split, read from its labels file alone (one byte per example, not
// the images'). InputError as load_fashion_mnist for that file.
std::size_t fashion_mnist_size(const std::filesystem::path& dir, const std::string& split);

// The training and test splits, checked to have images of one size: a model is built for the
// training images' size, so test images of another size cannot be evaluated (they used to be read
// out of bounds).
struct TrainTestSets {
  Dataset train;
  Dataset test;
};
TrainTestSets load_fashion_mnist_train_test(const std::filesystem::path& dir);
// InputError naming `where` unless both sets have images of the same rows x cols.
void check_same_image_size(const Dataset& train, const Dataset& test, const std::string& where);

// Builds a Dataset from IDX arrays, validating shapes and label range; `where` names the files.
Dataset make_dataset(const std::vector<std::uint32_t>& image_dims, std::vector<std::uint8_t> pixels,
                     const std::vector<std::uint32_t>& label_dims,
                     const std::vector<std::uint8_t>& labels, int num_classes,
                     const std::string& where);

}  // namespace sgp::data
