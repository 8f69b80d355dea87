#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "sgp/data/dataset.hpp"
#include "sgp/data/idx_cache.hpp"
#include "sgp/data/idx_file.hpp"
#include "sgp/error.hpp"
#include "support/input_error.hpp"
#include "support/peak_rss.hpp"
#include "support/skip.hpp"
#include "support/temp_dir.hpp"
#include "support/text.hpp"

using sgp::InputError;
using sgp::data::read_idx_u8;

namespace {

std::vector<std::uint8_t> idx_bytes(std::vector<std::uint32_t> dims,
                                    const std::vector<std::uint8_t>& values,
                                    std::uint8_t type = 0x08) {
  std::vector<std::uint8_t> bytes = {0, 0, type, static_cast<std::uint8_t>(dims.size())};
  for (std::uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back((d >> shift) & 0xff);
  }
  bytes.insert(bytes.end(), values.begin(), values.end());
  return bytes;
}

void write_plain(const std::filesystem::path& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

void write_gz(const std::filesystem::path& path, const std::vector<std::uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) ==
          static_cast<int>(bytes.size()));
  gzclose(f);
}

// Runs `fn`, expecting an InputError whose message contains every one of `parts`.
template <class Fn>
void check_error(Fn fn, std::vector<std::string> parts) {
  const std::string message = sgp::testing::input_error_of(fn);
  REQUIRE_MESSAGE(!message.empty(), "expected an InputError");
  for (const auto& part : parts) CHECK_MESSAGE(sgp::testing::contains(message, part), message);
}

std::vector<std::uint8_t> file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// SGP_CACHE_DIR set for a scope (the suite's own is restored after).
class CacheDirFor {
 public:
  explicit CacheDirFor(const std::string& dir) {
    if (const char* old = std::getenv("SGP_CACHE_DIR")) old_ = old;
    ::setenv("SGP_CACHE_DIR", dir.c_str(), 1);
  }
  ~CacheDirFor() {
    if (old_) {
      ::setenv("SGP_CACHE_DIR", old_->c_str(), 1);
    } else {
      ::unsetenv("SGP_CACHE_DIR");
    }
  }

 private:
  std::optional<std::string> old_;
};

}  // namespace

TEST_CASE("IDX reader reads plain and gzip files") {
  sgp::testing::TempDir dir;
  const std::vector<std::uint8_t> values = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  const auto bytes = idx_bytes({2, 2, 3}, values);
  write_plain(dir / "plain", bytes);
  write_gz(dir / "packed.gz", bytes);
  for (const char* name : {"plain", "packed.gz"}) {
    const auto array = read_idx_u8(dir / name, 3);
    CHECK(array.dims == std::vector<std::uint32_t>{2, 2, 3});
    CHECK(array.values == values);
  }
}

TEST_CASE("a gzip IDX file is read from its decompressed copy once one was made") {
  sgp::testing::TempDir data, cache;
  const CacheDirFor cache_dir(cache.path().string());
  const std::vector<std::uint8_t> values = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  const auto bytes = idx_bytes({2, 2, 3}, values);
  const auto source = data / "images.gz";
  write_gz(source, bytes);
  CHECK_FALSE(sgp::data::cached_copy(source));
  CHECK(read_idx_u8(source, 3).values == values);
  const auto copy = sgp::data::cached_copy(source);
  REQUIRE(copy);
  CHECK(file_bytes(*copy) == bytes);  // the decompressed file itself
  // Read from the copy: a byte changed there is what the next read returns.
  auto changed = bytes;
  changed.back() = 99;
  write_plain(*copy, changed);
  CHECK(read_idx_u8(source, 3).values.back() == 99);
  // A source rewritten at the same size is not read from the old copy.
  auto rewritten = values;
  rewritten.front() = 42;
  write_gz(source, idx_bytes({2, 2, 3}, rewritten));
  CHECK(read_idx_u8(source, 3).values == rewritten);
  // A shard's read writes the whole file's copy, whichever items it keeps.
  const auto shard_source = data / "shard.gz";
  write_gz(shard_source, bytes);
  const auto second = sgp::data::read_idx_u8_items(shard_source, 3, {false, true});
  CHECK(second.values == std::vector<std::uint8_t>(values.begin() + 6, values.end()));
  REQUIRE(sgp::data::cached_copy(shard_source));
  CHECK(file_bytes(*sgp::data::cached_copy(shard_source)) == bytes);
  CHECK(sgp::data::read_idx_u8_items(shard_source, 3, {false, true}).values == second.values);
}

TEST_CASE("a broken source leaves no copy, and a cache that cannot be written is no error") {
  sgp::testing::TempDir data, cache;
  const auto good = idx_bytes({3, 2, 2}, std::vector<std::uint8_t>(12, 7));
  write_gz(data / "good.gz", good);
  SUBCASE("truncated: refused as before, nothing left in the cache") {
    const CacheDirFor cache_dir(cache.path().string());
    auto bytes = good;
    bytes.resize(bytes.size() - 5);
    write_gz(data / "short.gz", bytes);
    check_error([&] { read_idx_u8(data / "short.gz", 3); }, {"short.gz", "truncated", "12"});
    check_error(
        [&] {
          sgp::data::read_idx_u8_items(data / "short.gz", 3, {true, true, true});
        },
        {"short.gz", "truncated"});
    const auto dir = cache / "idx";
    CHECK((!std::filesystem::exists(dir) || std::filesystem::is_empty(dir)));
  }
  SUBCASE("the cache is a path under a file: the source is read") {
    const CacheDirFor cache_dir((data / "good.gz" / "cache").string());
    CHECK(read_idx_u8(data / "good.gz", 3).values.size() == 12);
    CHECK_FALSE(sgp::data::cached_copy(data / "good.gz"));
  }
  SUBCASE("SGP_CACHE_DIR=off: no cache") {
    const CacheDirFor cache_dir("off");
    CHECK_FALSE(sgp::data::cache_dir());
    CHECK(read_idx_u8(data / "good.gz", 3).values.size() == 12);
  }
}

TEST_CASE("IDX reader rejects broken files with the file and the problem") {
  sgp::testing::TempDir dir;
  const auto good = idx_bytes({3, 2, 2}, std::vector<std::uint8_t>(12, 7));

  SUBCASE("missing") {
    check_error([&] { read_idx_u8(dir / "nope.gz", 3); }, {"nope.gz", "no such file"});
  }
  SUBCASE("truncated data") {
    auto bytes = good;
    bytes.resize(bytes.size() - 5);
    write_gz(dir / "short.gz", bytes);
    check_error([&] { read_idx_u8(dir / "short.gz", 3); }, {"short.gz", "truncated", "12"});
  }
  SUBCASE("truncated header") {
    write_plain(dir / "tiny", {0, 0});
    check_error([&] { read_idx_u8(dir / "tiny", 3); }, {"tiny", "truncated", "magic"});
  }
  SUBCASE("wrong magic") {
    auto bytes = good;
    bytes[0] = 0x1f;
    write_plain(dir / "magic", bytes);
    check_error([&] { read_idx_u8(dir / "magic", 3); }, {"magic", "not an IDX file"});
  }
  SUBCASE("wrong type") {
    write_plain(dir / "floats", idx_bytes({1}, {0, 0, 0, 0}, 0x0d));
    check_error([&] { read_idx_u8(dir / "floats", 1); }, {"floats", "0x0d", "not supported"});
  }
  SUBCASE("wrong number of dimensions") {
    write_plain(dir / "dims", good);
    check_error([&] { read_idx_u8(dir / "dims", 1); }, {"dims", "3 dimensions, expected 1"});
  }
  SUBCASE("trailing bytes") {
    auto bytes = good;
    bytes.push_back(9);
    write_plain(dir / "long", bytes);
    check_error([&] { read_idx_u8(dir / "long", 3); }, {"long", "unexpected bytes"});
  }
  SUBCASE("corrupt gzip stream") {
    std::vector<std::uint8_t> bytes = {0x1f, 0x8b, 8,    0,    0,    0,    0,    0,   0,
                                       3,    0xde, 0xad, 0xbe, 0xef, 0x00, 0x11, 0x22};
    write_plain(dir / "corrupt.gz", bytes);
    check_error([&] { read_idx_u8(dir / "corrupt.gz", 3); }, {"corrupt.gz"});
  }
}

TEST_CASE(
    "IDX reader: a header declaring 1.2 GB in a small file is refused without allocating it") {
  sgp::testing::TempDir dir;
  // 20,000 images of 245 x 245 pixels declared, 10 present.
  write_plain(dir / "bomb", idx_bytes({20000, 245, 245}, std::vector<std::uint8_t>(10, 1)));
  write_gz(dir / "bomb.gz", idx_bytes({20000, 245, 245}, std::vector<std::uint8_t>(10, 1)));
  for (const char* name : {"bomb", "bomb.gz"}) {
    CAPTURE(name);
    const auto before = sgp::testing::peak_rss_bytes();
    check_error([&] { read_idx_u8(dir / name, 3); },
                {name, "1200500000", "more than the file can hold"});
    const auto growth = sgp::testing::peak_rss_bytes() - before;
    MESSAGE("peak RSS growth reading " << name << ": " << growth / 1024 << " KiB");
    CHECK(growth < (64 << 20));
  }
}

TEST_CASE("IDX reader: billions of labels declared are bounded by the file's length") {
  sgp::testing::TempDir dir;
  // 3e9 labels declared, 4 present: a plain file holds its length, a gzip file at most 1032x it.
  write_plain(dir / "labels", idx_bytes({3000000000u}, {1, 2, 3, 4}));
  write_gz(dir / "labels.gz", idx_bytes({3000000000u}, {1, 2, 3, 4}));
  check_error([&] { read_idx_u8(dir / "labels", 1); },
              {"labels", "3000000000 values", "(4 at most)"});
  check_error([&] { read_idx_u8(dir / "labels.gz", 1); },
              {"labels.gz", "3000000000 values", "more than the file can hold"});
  // A file of exactly its declared length still reads.
  write_plain(dir / "four", idx_bytes({4}, {1, 2, 3, 4}));
  CHECK(read_idx_u8(dir / "four", 1).values.size() == 4);
}

TEST_CASE("train and test images of different sizes are an InputError, not a crash") {
  sgp::testing::TempDir dir;
  auto write_split = [&](const std::string& split, std::uint32_t side) {
    write_gz(dir / (split + "-images-idx3-ubyte.gz"),
             idx_bytes({2, side, side}, std::vector<std::uint8_t>(2 * side * side, 9)));
    write_gz(dir / (split + "-labels-idx1-ubyte.gz"), idx_bytes({2}, {1, 2}));
  };
  write_split("train", 28);
  write_split("t10k", 20);
  check_error([&] { sgp::data::load_fashion_mnist_train_test(dir.path()); },
              {dir.path().string(), "training images are 28 x 28", "test images are 20 x 20"});
  write_split("t10k", 28);
  const auto sets = sgp::data::load_fashion_mnist_train_test(dir.path());
  CHECK(sets.train.features() == sets.test.features());
}

TEST_CASE("data sets check counts and label range, and normalise pixels") {
  SUBCASE("label out of range") {
    check_error(
        [] {
          sgp::data::make_dataset({2, 1, 1}, {0, 255}, {2}, {3, 10}, 10, "set.idx");
        },
        {"set.idx", "label 10 of sample 1", "0..9"});
  }
  SUBCASE("count mismatch") {
    check_error(
        [] {
          sgp::data::make_dataset({2, 1, 1}, {0, 255}, {3}, {1, 2, 3}, 10, "x");
        },
        {"2 images but 3 labels"});
  }
  SUBCASE("normalisation") {
    const auto set = sgp::data::make_dataset({2, 1, 1}, {0, 255}, {2}, {3, 9}, 10, "x");
    std::vector<float> images(2);
    set.normalised_images(0, 2, images.data());
    CHECK(images[0] == doctest::Approx(-0.2860 / 0.3530).epsilon(1e-6));
    CHECK(images[1] == doctest::Approx((1.0 - 0.2860) / 0.3530).epsilon(1e-6));
    CHECK(set.labels == std::vector<std::int32_t>{3, 9});
  }
}

TEST_CASE("a peer's shard holds the images of its samples only, read one at a time") {
  sgp::testing::TempDir dir;
  std::vector<std::uint8_t> pixels(6 * 4);  // six 2 x 2 images, image i of pixels 10 i + 0..3
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = (i / 4) * 10 + i % 4;
  write_gz(dir / "train-images-idx3-ubyte.gz", idx_bytes({6, 2, 2}, pixels));
  write_gz(dir / "train-labels-idx1-ubyte.gz", idx_bytes({6}, {0, 1, 2, 3, 4, 5}));
  const auto whole = sgp::data::load_fashion_mnist(dir.path(), "train");
  std::size_t labels_seen = 0;
  const auto shard = sgp::data::load_fashion_mnist_shard(dir.path(), "train",
                                                         [&](const sgp::data::Dataset& labels) {
                                                           labels_seen = labels.size();
                                                           return std::vector<std::size_t>{4, 1};
                                                         });
  CHECK(labels_seen == 6);
  CHECK(shard.size() == 6);
  CHECK(shard.labels == whole.labels);
  CHECK(shard.pixels.size() == 2 * 4);  // two images held
  CHECK(shard.features() == 4);
  for (std::size_t i : {1, 4}) {
    CAPTURE(i);
    CHECK(std::equal(shard.image(i), shard.image(i) + 4, whole.image(i)));
    std::vector<float> held(4), expected(4);
    shard.normalised_images(i, 1, held.data());
    whole.normalised_images(i, 1, expected.data());
    CHECK(held == expected);
  }
  CHECK_THROWS_AS(shard.image(0), sgp::InvariantError);
  // The images file must have one image per label.
  write_gz(dir / "train-images-idx3-ubyte.gz", idx_bytes({5, 2, 2}, std::vector<std::uint8_t>(20)));
  check_error(
      [&] {
        sgp::data::load_fashion_mnist_shard(dir.path(), "train",
                                            [](const auto&) { return std::vector<std::size_t>{}; });
      },
      {"train-images-idx3-ubyte.gz", "5 items, expected 6"});
}

TEST_CASE("a streamed split reads its images per chunk from a plain file, or holds a gzip one") {
  sgp::testing::TempDir dir, cache;
  const CacheDirFor cache_dir(cache.path().string());
  std::vector<std::uint8_t> pixels(5 * 4);  // five 2 x 2 images
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<std::uint8_t>(7 * i);
  write_gz(dir / "t10k-images-idx3-ubyte.gz", idx_bytes({5, 2, 2}, pixels));
  write_gz(dir / "t10k-labels-idx1-ubyte.gz", idx_bytes({5}, {4, 3, 2, 1, 0}));
  std::vector<float> expected(3 * 4), got(3 * 4);
  SUBCASE("gzip: held as a whole split until its decompressed copy is made, then read there") {
    const auto held = sgp::data::load_fashion_mnist_streamed(dir.path(), "t10k");
    CHECK_FALSE(held.image_file);
    CHECK(held.pixels == pixels);
    held.normalised_images(1, 3, expected.data());
    const auto set = sgp::data::load_fashion_mnist_streamed(dir.path(), "t10k");
    REQUIRE(set.image_file);
    CHECK(set.pixels.empty());
    set.normalised_images(1, 3, got.data());
    CHECK(got == expected);
  }
  const CacheDirFor no_cache("off");
  const auto whole = sgp::data::load_fashion_mnist(dir.path(), "t10k");
  whole.normalised_images(1, 3, expected.data());
  SUBCASE("a plain file: read where it is") {
    std::filesystem::remove(dir / "t10k-images-idx3-ubyte.gz");
    write_plain(dir / "t10k-images-idx3-ubyte", idx_bytes({5, 2, 2}, pixels));
    const auto set = sgp::data::load_fashion_mnist_streamed(dir.path(), "t10k");
    REQUIRE(set.image_file);
    CHECK(set.pixels.empty());
    CHECK(set.labels == whole.labels);
    CHECK(set.features() == 4);
    set.normalised_images(1, 3, got.data());
    CHECK(got == expected);
    CHECK_THROWS_AS(set.image(0), sgp::InvariantError);
    CHECK_THROWS_AS(set.normalised_images(3, 3, got.data()), sgp::InvariantError);
    // The file shrinks under the run: an IoError naming it, not garbage.
    std::filesystem::resize_file(dir / "t10k-images-idx3-ubyte", 16 + 8);
    std::string message;
    try {
      set.normalised_images(1, 3, got.data());
    } catch (const sgp::IoError& e) {
      message = e.what();
    }
    CHECK_MESSAGE(sgp::testing::contains(message, "t10k-images-idx3-ubyte"), message);
    CHECK_MESSAGE(sgp::testing::contains(message, "shorter"), message);
  }
  SUBCASE("a plain file whose length is not its header's") {
    std::filesystem::remove(dir / "t10k-images-idx3-ubyte.gz");
    auto bytes = idx_bytes({5, 2, 2}, pixels);
    bytes.push_back(0);
    write_plain(dir / "t10k-images-idx3-ubyte", bytes);
    check_error([&] { sgp::data::load_fashion_mnist_streamed(dir.path(), "t10k"); },
                {"t10k-images-idx3-ubyte", "37 bytes", "20 values"});
  }
}

TEST_CASE("a missing data directory names the files and the Debian package") {
  sgp::testing::TempDir dir;
  check_error([&] { sgp::data::load_fashion_mnist(dir.path(), "train"); },
              {"train-images-idx3-ubyte", "dataset-fashion-mnist"});
}

TEST_CASE("the real Fashion-MNIST files load with the documented shapes") {
  const auto dir = sgp::data::resolve_data_dir("");
  if (!std::filesystem::exists(dir / "t10k-labels-idx1-ubyte.gz")) {
    SGP_SKIP("Fashion-MNIST is not installed at " + dir.string());
  }
  const auto test = sgp::data::load_fashion_mnist(dir, "t10k");
  CHECK(test.size() == 10000);
  CHECK(test.rows == 28);
  CHECK(test.cols == 28);
  std::vector<int> per_class(10);
  for (auto label : test.labels) ++per_class[label];
  for (int count : per_class) CHECK(count == 1000);
}
