#pragma once
// A fresh directory under the system temp dir, removed at scope exit.
#include <filesystem>
#include <random>
#include <string>

namespace sgp::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "sgp-test") {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            (prefix + "-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

}  // namespace sgp::testing
