#pragma once
// IDX files (the MNIST format): big-endian magic 0x0000 <type> <ndims>, then ndims big-endian
// uint32 sizes, then the data. Read through zlib, so gzip-compressed and plain files both work.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

namespace sgp::data {

struct IdxArray {
  std::vector<std::uint32_t> dims;
  std::vector<std::uint8_t> values;  // only unsigned-byte IDX files (type 0x08) are supported
};

// Reads an unsigned-byte IDX file with `expected_ndims` dimensions (a gzip file from its
// decompressed copy in the cache, idx_cache.hpp, where there is one). Throws InputError naming the
// file and the problem: missing, unreadable, not gzip/IDX, wrong magic, wrong number of
// dimensions, truncated data, or trailing bytes.
IdxArray read_idx_u8(const std::filesystem::path& path, std::uint32_t expected_ndims);

// The same, holding only the items (slices along the first dimension: images) i with keep[i],
// in order, read one at a time: a peer's shard costs its own bytes, not the file's. dims are the
// file's; InputError as above, or when the file has not keep.size() items.
IdxArray read_idx_u8_items(const std::filesystem::path& path, std::uint32_t expected_ndims,
                           const std::vector<bool>& keep);

// The items of an uncompressed unsigned-byte IDX file, read where they are when asked for
// (pread): a set every peer of a host reads (the test set) is then held once, by the page cache,
// and in no peer's resident memory.
class IdxItemFile {
 public:
  // Nothing when `path` is gzip-compressed (no random access); InputError as read_idx_u8 for a
  // missing file, a bad header, or a length that is not the header's plus the values it declares.
  static std::unique_ptr<IdxItemFile> open(const std::filesystem::path& path,
                                           std::uint32_t expected_ndims);
  IdxItemFile(const IdxItemFile&) = delete;
  IdxItemFile& operator=(const IdxItemFile&) = delete;
  ~IdxItemFile();

  const std::vector<std::uint32_t>& dims() const { return dims_; }
  // Items [first, first + count) to `out` (count items' bytes); IoError naming the file when it
  // cannot be read (it shrank under the run, a disk error).
  void read_items(std::size_t first, std::size_t count, std::uint8_t* out) const;

 private:
  IdxItemFile(int fd, std::filesystem::path path, std::vector<std::uint32_t> dims);

  int fd_;
  std::filesystem::path path_;
  std::vector<std::uint32_t> dims_;
  std::uint64_t item_bytes_, data_offset_;
};

}  // namespace sgp::data
