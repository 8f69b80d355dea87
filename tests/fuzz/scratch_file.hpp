#pragma once
// For fuzz targets whose reader takes a path: one private directory per process (removed at
// exit, in /dev/shm where it exists), and a helper that writes the input to a file in it.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>

namespace sgp::fuzz {

class ScratchDir {
 public:
  ScratchDir() {
    // tmpfs when there is one: on ext4, truncating and rewriting a file flushes it to the disk
    // on close, which took most of each execution's time.
    std::error_code ec;
    const auto base = std::filesystem::is_directory("/dev/shm", ec)
                          ? std::filesystem::path("/dev/shm")
                          : std::filesystem::temp_directory_path();
    std::string pattern = (base / "sgp-fuzz-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  // Writes `bytes` to <dir>/<name> (replacing it) and returns the path.
  std::filesystem::path write(const std::string& name, std::span<const std::uint8_t> bytes) const {
    const auto path = path_ / name;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    return path;
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace sgp::fuzz
