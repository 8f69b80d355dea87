// Fuzz target: the IDX reader (read_idx_u8, plain or gzip) and the data set built from it.
#include <algorithm>

#include "fuzz_target.hpp"
#include "scratch_file.hpp"
#include "sgp/data/dataset.hpp"
#include "sgp/data/idx_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const sgp::fuzz::ScratchDir dir;
  return sgp::fuzz::run_target(data, size, [](std::span<const std::uint8_t> bytes) {
    const auto path = dir.write("input.idx", bytes);
    // Images have 3 dimensions, labels 1; the fourth byte of a real file says which.
    const std::uint32_t ndims = bytes.size() > 3 && bytes[3] == 1 ? 1 : 3;
    const auto array = sgp::data::read_idx_u8(path, ndims);
    if (ndims == 3) {
      // One label per image; images of 0 pixels would let dims[0] (up to 2^32) size the labels
      // here, an allocation the real loader never makes (it reads labels from their own file).
      const std::vector<std::uint8_t> labels(
          std::min<std::size_t>(array.dims[0], array.values.size() + 1), 1);
      sgp::data::make_dataset(array.dims, array.values, {array.dims[0]}, labels, 10, "fuzz");
    }
  });
}
