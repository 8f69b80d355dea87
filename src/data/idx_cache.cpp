#include "sgp/data/idx_cache.hpp"

#include <unistd.h>
#include <xxhash.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace sgp::data {

namespace {

std::optional<std::filesystem::path> env_path(const char* name) {
  const char* value = std::getenv(name);
  if (!value || !*value) return std::nullopt;
  return std::filesystem::path(value);
}

// XXH3 of a file's bytes (26 MB of compressed training images: a few milliseconds).
std::optional<std::uint64_t> file_hash(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  const std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(),
                                                                       &XXH3_freeState);
  if (!state) return std::nullopt;
  XXH3_64bits_reset(state.get());
  std::vector<char> block(std::size_t{1} << 20);
  while (in.read(block.data(), static_cast<std::streamsize>(block.size())) || in.gcount() > 0) {
    XXH3_64bits_update(state.get(), block.data(), static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad()) return std::nullopt;
  return XXH3_64bits_digest(state.get());
}

// Where the copy of `source` belongs: its name and the hash of its bytes, so that a file
// rewritten in place (within the file system's timestamp tick, at the same size) is never read
// stale.
std::optional<std::filesystem::path> copy_path(const std::filesystem::path& source) {
  if (source.extension() != ".gz") return std::nullopt;
  const auto dir = cache_dir();
  if (!dir) return std::nullopt;
  const auto hash = file_hash(source);
  if (!hash) return std::nullopt;
  return *dir / "idx" / fmt::format("{}-{:016x}", source.stem().string(), *hash);
}

}  // namespace

std::optional<std::filesystem::path> cache_dir() {
  if (const auto dir = env_path("SGP_CACHE_DIR")) {
    if (*dir == "off") return std::nullopt;
    return dir;
  }
  if (const auto xdg = env_path("XDG_CACHE_HOME")) return *xdg / "sgp";
  if (const auto home = env_path("HOME")) return *home / ".cache" / "sgp";
  return std::nullopt;
}

ReadPlan plan_read(const std::filesystem::path& source) {
  auto copy = copy_path(source);
  std::error_code ec;
  if (copy && std::filesystem::is_regular_file(*copy, ec)) return {*copy, std::nullopt};
  return {source, std::move(copy)};
}

std::optional<std::filesystem::path> cached_copy(const std::filesystem::path& source) {
  auto plan = plan_read(source);
  if (plan.read == source) return std::nullopt;
  return std::move(plan.read);
}

CacheWriter::CacheWriter(const std::optional<std::filesystem::path>& copy) {
  if (!copy) return;
  std::error_code ec;
  std::filesystem::create_directories(copy->parent_path(), ec);
  if (ec) return;
  final_ = *copy;
  temp_ = copy->string() + fmt::format(".{}.tmp", ::getpid());
  out_.open(temp_, std::ios::binary | std::ios::trunc);
  if (!out_) abandon();
}

CacheWriter::~CacheWriter() { abandon(); }

void CacheWriter::write(const void* bytes, std::size_t size) {
  if (!out_.is_open()) return;
  out_.write(static_cast<const char*>(bytes), static_cast<std::streamsize>(size));
  if (!out_) abandon();  // a full disk: no copy, the source is read next time too
}

// Renamed into place only when every byte reached the file: a copy is whole or absent.
void CacheWriter::commit() {
  if (!out_.is_open()) return;
  out_.close();
  std::error_code ec;
  if (!out_.fail()) std::filesystem::rename(temp_, final_, ec);
  if (!out_.fail() && !ec) {
    temp_.clear();
    return;
  }
  spdlog::debug("{}: not cached ({})", final_.string(), ec ? ec.message() : "write failed");
  abandon();
}

void CacheWriter::abandon() {
  if (out_.is_open()) out_.close();
  if (temp_.empty()) return;
  std::error_code ec;
  std::filesystem::remove(temp_, ec);
  temp_.clear();
}

}  // namespace sgp::data
