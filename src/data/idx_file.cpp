#include "sgp/data/idx_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fmt/std.h>

#include "sgp/data/idx_cache.hpp"
#include "sgp/error.hpp"

namespace sgp::data {

namespace {

constexpr std::uint8_t kUnsignedByteType = 0x08;
// Refuse absurd headers before allocating: Fashion-MNIST's largest file is 47 MB of pixels.
constexpr std::uint64_t kMaxElements = std::uint64_t{1} << 32;

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

std::uint32_t big_endian_u32(const std::array<std::uint8_t, 4>& b) {
  return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) |
         std::uint32_t{b[3]};
}

bool is_gzip(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::array<char, 2> magic{};
  return in.read(magic.data(), 2) && magic[0] == '\x1f' && magic[1] == '\x8b';
}

// Deflate expands at most about 1032:1, so a gzip file of B bytes holds at most this many
// bytes; a plain file holds exactly its length.
constexpr std::uint64_t kMaxDeflateRatio = 1032;

// The most data bytes `path` can hold after a header of `header_bytes`.
std::uint64_t data_capacity(const std::filesystem::path& path, std::uint64_t header_bytes) {
  std::error_code ec;
  const std::uint64_t length = std::filesystem::file_size(path, ec);
  if (ec) return kMaxElements;  // not a regular file (a pipe): the reader's checks still hold
  if (is_gzip(path)) return length * kMaxDeflateRatio;
  return length > header_bytes ? length - header_bytes : 0;
}

class Reader {
 public:
  explicit Reader(const std::filesystem::path& path) : path_(path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      throw InputError(
          fmt::format("{}: no such file (install the Debian package "
                      "dataset-fashion-mnist, or set --data-dir / SGP_DATA_DIR)",
                      path));
    }
    file_.reset(gzopen(path.c_str(), "rb"));
    if (!file_) throw InputError(fmt::format("{}: cannot open for reading", path));
  }

  // Reads exactly `size` bytes; `what` names the part of the file for the error message.
  void read_exactly(void* dst, std::size_t size, const std::string& what) {
    auto* out = static_cast<std::uint8_t*>(dst);
    std::size_t done = 0;
    while (done < size) done += read_some(out + done, size - done, what, size, done);
  }

  // Appends exactly `size` bytes to `out`, growing it only as data actually arrives: a header
  // that declares more than the file holds fails at the end of the file, having allocated at most
  // about twice what the file contains (steps double from 4 KiB to 1 MiB), not what it claims.
  void append_exactly(std::vector<std::uint8_t>& out, std::size_t size, const std::string& what) {
    constexpr std::size_t kFirstStep = std::size_t{1} << 12, kMaxStep = std::size_t{1} << 20;
    std::size_t done = 0;
    while (done < size) {
      const std::size_t step = std::min({size - done, std::max(done, kFirstStep), kMaxStep});
      out.resize(done + step);  // geometric growth: amortised
      std::size_t filled = 0;
      while (filled < step)
        filled += read_some(out.data() + done + filled, step - filled, what, size, done + filled);
      done += step;
    }
  }

  bool at_end() {
    std::uint8_t extra = 0;
    const int got = gzread(file_.get(), &extra, 1);
    if (got < 0) fail_zlib("trailing data");
    return got == 0;
  }

 private:
  // One gzread of at most `size` bytes (> 0); `total` and `done` describe the whole read.
  std::size_t read_some(std::uint8_t* dst, std::size_t size, const std::string& what,
                        std::size_t total, std::size_t done) {
    const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(size, 1u << 30));
    const int got = gzread(file_.get(), dst, chunk);
    if (got < 0) fail_zlib(what);
    if (got == 0) {
      throw InputError(fmt::format("{}: truncated: {} needs {} bytes, only {} present", path_, what,
                                   total, done));
    }
    return static_cast<std::size_t>(got);
  }

  [[noreturn]] void fail_zlib(const std::string& what) {
    int code = 0;
    const char* message = gzerror(file_.get(), &code);
    throw InputError(fmt::format("{}: corrupt compressed data while reading {}: {}", path_, what,
                                 message ? message : "unknown zlib error"));
  }

  std::filesystem::path path_;
  GzFile file_;
};

// The header bytes of an unsigned-byte IDX file of these dimensions.
std::vector<std::uint8_t> header_bytes(const std::vector<std::uint32_t>& dims) {
  std::vector<std::uint8_t> bytes{0, 0, kUnsignedByteType, static_cast<std::uint8_t>(dims.size())};
  for (std::uint32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8)
      bytes.push_back(static_cast<std::uint8_t>(d >> shift));
  return bytes;
}

// Reads and checks the header of an unsigned-byte IDX file: its dimensions, and that the file can
// hold the values they declare (their number is returned).
std::uint64_t read_header(Reader& reader, const std::filesystem::path& path,
                          std::uint32_t expected_ndims, std::vector<std::uint32_t>& dims) {
  std::array<std::uint8_t, 4> magic{};
  reader.read_exactly(magic.data(), magic.size(), "the 4-byte magic number");
  if (magic[0] != 0 || magic[1] != 0) {
    throw InputError(fmt::format(
        "{}: not an IDX file: magic number starts with {:#04x} {:#04x}, expected 0x00 0x00", path,
        magic[0], magic[1]));
  }
  if (magic[2] != kUnsignedByteType) {
    throw InputError(
        fmt::format("{}: IDX data type {:#04x} is not supported (expected 0x08, "
                    "unsigned byte)",
                    path, magic[2]));
  }
  if (magic[3] != expected_ndims) {
    throw InputError(
        fmt::format("{}: IDX file has {} dimensions, expected {}", path, magic[3], expected_ndims));
  }
  std::uint64_t elements = 1;
  for (std::uint32_t d = 0; d < expected_ndims; ++d) {
    std::array<std::uint8_t, 4> size{};
    reader.read_exactly(size.data(), size.size(), "the dimension sizes");
    dims.push_back(big_endian_u32(size));
    elements *= dims.back();
    if (elements > kMaxElements) {
      throw InputError(fmt::format("{}: IDX header declares an implausible size", path));
    }
  }
  const std::uint64_t capacity = data_capacity(path, 4 + 4 * std::uint64_t{expected_ndims});
  if (elements > capacity) {
    throw InputError(fmt::format(
        "{}: the IDX header declares {} values ({}), more than the file can hold ({} at most)",
        path, elements, fmt::join(dims, " x "), capacity));
  }
  return elements;
}

void check_at_end(Reader& reader, const std::filesystem::path& path, std::uint64_t elements) {
  if (!reader.at_end()) {
    throw InputError(fmt::format("{}: unexpected bytes after the {} values the header declares",
                                 path, elements));
  }
}

}  // namespace

// A gzip file is read from its decompressed copy in the cache where there is one (idx_cache.hpp);
// otherwise the copy is written as the file is read, and kept once all of it passed the checks.
IdxArray read_idx_u8(const std::filesystem::path& source, std::uint32_t expected_ndims) {
  const auto plan = plan_read(source);
  const auto& path = plan.read;
  Reader reader(path);
  IdxArray array;
  const std::uint64_t elements = read_header(reader, path, expected_ndims, array.dims);
  reader.append_exactly(array.values, elements, fmt::format("the data ({} values)", elements));
  check_at_end(reader, path, elements);
  CacheWriter writer(plan.new_copy);
  const auto header = header_bytes(array.dims);
  writer.write(header.data(), header.size());
  writer.write(array.values.data(), array.values.size());
  writer.commit();
  return array;
}

IdxArray read_idx_u8_items(const std::filesystem::path& source, std::uint32_t expected_ndims,
                           const std::vector<bool>& keep) {
  const auto plan = plan_read(source);
  const auto& path = plan.read;
  Reader reader(path);
  IdxArray array;
  const std::uint64_t elements = read_header(reader, path, expected_ndims, array.dims);
  if (array.dims[0] != keep.size()) {
    throw InputError(
        fmt::format("{}: {} items, expected {} (one per label)", path, array.dims[0], keep.size()));
  }
  // Without a copy, every item is written to a new one as it is read (whichever are kept).
  CacheWriter writer(plan.new_copy);
  const auto header = header_bytes(array.dims);
  writer.write(header.data(), header.size());
  const std::size_t item_size = keep.empty() ? 0 : elements / keep.size();
  std::vector<std::uint8_t> item(item_size);
  for (std::size_t i = 0; i < keep.size(); ++i) {
    reader.read_exactly(item.data(), item_size, fmt::format("item {} of {}", i, keep.size()));
    writer.write(item.data(), item.size());
    if (keep[i]) array.values.insert(array.values.end(), item.begin(), item.end());
  }
  check_at_end(reader, path, elements);
  writer.commit();
  return array;
}

std::unique_ptr<IdxItemFile> IdxItemFile::open(const std::filesystem::path& path,
                                               std::uint32_t expected_ndims) {
  Reader reader(path);  // InputError for a missing or unreadable file
  if (is_gzip(path)) return nullptr;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(fmt::format("{}: cannot open for reading", path));
  std::unique_ptr<IdxItemFile> file(new IdxItemFile(fd, path, {}));
  const std::uint64_t elements = read_header(reader, path, expected_ndims, file->dims_);
  file->data_offset_ = 4 + 4 * std::uint64_t{expected_ndims};
  file->item_bytes_ = file->dims_[0] == 0 ? 0 : elements / file->dims_[0];
  struct stat st {};
  if (::fstat(fd, &st) != 0 ||
      static_cast<std::uint64_t>(st.st_size) != file->data_offset_ + elements) {
    throw InputError(fmt::format("{}: {} bytes, but its IDX header declares {} values after {}",
                                 path, st.st_size, elements, file->data_offset_));
  }
  return file;
}

IdxItemFile::IdxItemFile(int fd, std::filesystem::path path, std::vector<std::uint32_t> dims)
    : fd_(fd), path_(std::move(path)), dims_(std::move(dims)), item_bytes_(0), data_offset_(0) {}

IdxItemFile::~IdxItemFile() { ::close(fd_); }

void IdxItemFile::read_items(std::size_t first, std::size_t count, std::uint8_t* out) const {
  SGP_ENFORCE(first + count <= dims_[0], "items {}..{} of {}'s {}", first, first + count, path_,
              dims_[0]);
  const std::uint64_t size = count * item_bytes_;
  const std::uint64_t offset = data_offset_ + first * item_bytes_;
  for (std::uint64_t done = 0; done < size;) {
    const ssize_t got = ::pread(fd_, out + done, size - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      throw IoError(fmt::format(
          "{}: cannot read items {}..{}: {}", path_, first, first + count,
          got == 0 ? "the file is shorter than when it was opened" : std::strerror(errno)));
    }
    done += static_cast<std::uint64_t>(got);
  }
}

}  // namespace sgp::data
