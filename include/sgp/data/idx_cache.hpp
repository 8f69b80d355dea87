#pragma once
// Decompressed copies of gzip IDX files in a per-user cache, so that a run's peers read bytes
// instead of each inflating the same file (0.3 s of a core for Fashion-MNIST's training images:
// 8 peers on 2 cores spent over a second of a run's start on it, and a peer held to a tenth of a
// core 3 s). A copy is named by its source's name and the hash (XXH3) of the source's bytes, so a
// changed source is never read from a stale copy; it is written only after the whole source was
// read and checked, to a temporary file renamed into place (a crash or a full disk leaves no
// partial copy), and is never required: whatever fails leaves the source to be read as before.
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <optional>

namespace sgp::data {

// The cache: $SGP_CACHE_DIR, else $XDG_CACHE_HOME/sgp, else $HOME/.cache/sgp; nullopt when none
// is set or SGP_CACHE_DIR is "off".
std::optional<std::filesystem::path> cache_dir();

// Where to read `source` from: its decompressed copy in the cache where there is one, else the
// source itself, and then where to write that copy (nullopt: a copy was read, the source is not
// gzip, or there is no cache). The source's bytes are hashed once for both.
struct ReadPlan {
  std::filesystem::path read;
  std::optional<std::filesystem::path> new_copy;
};
ReadPlan plan_read(const std::filesystem::path& source);

// The cached copy of gzip file `source`, if there is one.
std::optional<std::filesystem::path> cached_copy(const std::filesystem::path& source);

// Writes a copy (at `copy`, a ReadPlan's new_copy) while its source is read: write() the
// decompressed bytes in order, then commit() once all were read and checked. Does nothing for
// nullopt or when the cache cannot be written to; destroyed without commit() (an error), it leaves
// nothing behind.
class CacheWriter {
 public:
  explicit CacheWriter(const std::optional<std::filesystem::path>& copy);
  CacheWriter(const CacheWriter&) = delete;
  CacheWriter& operator=(const CacheWriter&) = delete;
  ~CacheWriter();
  void write(const void* bytes, std::size_t size);
  void commit();

 private:
  void abandon();

  std::filesystem::path final_, temp_;
  std::ofstream out_;
};

}  // namespace sgp::data
