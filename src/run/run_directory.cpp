#include "sgp/run/run_directory.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <fmt/std.h>
#include <spdlog/spdlog.h>

#include "sgp/error.hpp"
#include "sgp/run/file_names.hpp"
#include "sgp/run/run_files.hpp"

namespace sgp::run {

std::string errno_text(int error) {
  const char* name = ::strerrorname_np(error);
  return name ? fmt::format("{} ({})", std::strerror(error), name) : std::strerror(error);
}

namespace {

[[noreturn]] void fail(const std::filesystem::path& path, const char* what) {
  throw IoError(fmt::format("{}: cannot {}: {}", path, what, errno_text(errno)));
}

// Descriptors run out when a flood of connections holds them; the transports close connections
// that do not complete a handshake within seconds (transport/listener_limits.hpp), so an open
// that finds none waits for them that long, twice over, before it gives up.
constexpr auto kDescriptorWait = std::chrono::seconds(12);

// open(2), waiting out a shortage of descriptors (EMFILE, ENFILE).
int open_waiting_for_descriptor(const std::filesystem::path& path, int flags, mode_t mode = 0) {
  const auto deadline = std::chrono::steady_clock::now() + kDescriptorWait;
  bool warned = false;
  for (;;) {
    const int fd = ::open(path.c_str(), flags, mode);
    if (fd >= 0 || (errno != EMFILE && errno != ENFILE) ||
        std::chrono::steady_clock::now() >= deadline) {
      return fd;
    }
    if (!warned) {
      spdlog::warn("{}: out of file descriptors ({}): waiting up to {} s for one", path,
                   errno_text(errno), kDescriptorWait.count());
      warned = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void fsync_path(const std::filesystem::path& path, int flags) {
  const int fd = open_waiting_for_descriptor(path, flags);
  if (fd < 0) fail(path, "open for fsync");
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) fail(path, "fsync");
}

// A temporary name no other writer uses: processes of several hosts may write the same file of a
// shared run directory at once (config.json), and one name for all would let one rename the
// other's half-written file, or find it gone ("cannot rename into place").
std::filesystem::path unique_temp_name(const std::filesystem::path& path) {
  static const std::uint64_t process_tag =
      (std::uint64_t{std::random_device{}()} << 32) | std::random_device{}();
  static std::atomic<std::uint64_t> counter{0};
  return path.parent_path() / fmt::format(".{}.{:016x}-{}.tmp", path.filename().string(),
                                          process_tag, counter.fetch_add(1));
}

}  // namespace

std::optional<std::string> temporary_file_target(const std::string& name) {
  constexpr std::string_view suffix = ".tmp";
  if (!name.starts_with('.') || !name.ends_with(suffix)) return std::nullopt;
  const std::string inner = name.substr(1, name.size() - 1 - suffix.size());
  const auto dot = inner.rfind('.');  // before "<16 hex digits>-<counter>"
  if (dot == std::string::npos || dot == 0) return std::nullopt;
  const std::string tag = inner.substr(dot + 1);
  const auto dash = tag.find('-');
  if (dash != 16 || tag.find_first_not_of("0123456789abcdef") != 16 || tag.size() == 17 ||
      tag.find_first_not_of("0123456789", 17) != std::string::npos) {
    return std::nullopt;
  }
  return inner.substr(0, dot);
}

std::optional<nlohmann::json> read_json_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

namespace {

// Writes, fsyncs and closes `temp`; on any failure removes it (a full disk must not keep a
// half-written copy) and throws IoError naming `path`, the step and errno.
void write_temp_file(const std::filesystem::path& temp, const std::filesystem::path& path,
                     const std::string& content) {
  const int fd = open_waiting_for_descriptor(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(path, fmt::format("create the temporary file {}", temp.filename()).c_str());
  auto give_up = [&](const char* step) {
    const int error = errno;
    ::close(fd);
    ::unlink(temp.c_str());
    errno = error;
    fail(path, step);
  };
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) give_up("write");
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) give_up("fsync");
  if (::close(fd) != 0) {  // NFS may report a failed write only here
    const int error = errno;
    ::unlink(temp.c_str());
    errno = error;
    fail(path, "close");
  }
}

}  // namespace

void write_file_atomically(const std::filesystem::path& path, const std::string& content) {
  const auto temp = unique_temp_name(path);
  write_temp_file(temp, path, content);
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    errno = error;
    fail(path, "rename into place");
  }
  fsync_path(path.parent_path().empty() ? "." : path.parent_path(), O_RDONLY | O_DIRECTORY);
}

bool create_file_atomically(const std::filesystem::path& path, const std::string& content) {
  const auto temp = unique_temp_name(path);
  write_file_atomically(temp, content);
  const int rc = ::link(temp.c_str(), path.c_str());
  const int link_errno = errno;
  std::filesystem::remove(temp);
  if (rc == 0) return true;
  if (link_errno == EEXIST) return false;
  errno = link_errno;
  fail(path, "create");
}

namespace {

std::string local_time_stamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm local{};
  localtime_r(&seconds, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
  return fmt::format("{}-{:03}", stamp, millis);
}

}  // namespace

std::filesystem::path create_default_run_dir(const std::string& prefix,
                                             const std::filesystem::path& root) {
  std::error_code ec;
  std::filesystem::create_directories(root, ec);
  if (ec) throw InputError(fmt::format("{}: cannot create it: {}", root, ec.message()));
  const std::string base = fmt::format("{}-{}", prefix, local_time_stamp());
  for (int attempt = 1; attempt <= 1000; ++attempt) {
    const auto dir = root / (attempt == 1 ? base : fmt::format("{}-{}", base, attempt));
    if (::mkdir(dir.c_str(), 0755) == 0) return dir;
    if (errno != EEXIST) fail(dir, "create the run directory");
  }
  throw IoError(fmt::format("{}: 1000 run directories named {}-* exist", root, base));
}

RunDirectory::RunDirectory(std::filesystem::path dir, int rank)
    : dir_(std::move(dir)), rank_(rank) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec || !std::filesystem::is_directory(dir_)) {
    throw InputError(fmt::format("run directory {}: cannot create it: {}", dir_,
                                 ec ? ec.message() : "exists and is not a directory"));
  }
}

void RunDirectory::claim(const RunClaim& claim) { run_id_ = claim_run_directory(dir_, claim); }

const std::string& RunDirectory::run_id() const {
  SGP_ENFORCE(!run_id_.empty(), "run directory {} was not claimed", dir_);
  return run_id_;
}

void RunDirectory::write_json(std::string_view name, const nlohmann::json& value) const {
  write_file_atomically(dir_ / name, value.dump(2) + "\n");
}

std::filesystem::path RunDirectory::log_path() const {
  SGP_ENFORCE(rank_ >= 0, "this run directory has no peer log");
  return dir_ / peer_log_file(rank_);
}

double rewind_jsonl(const std::filesystem::path& path, std::int64_t iteration) {
  std::ifstream in(path);
  if (!in) return 0.0;
  std::string kept, line;
  double wall_time = 0.0;
  while (std::getline(in, line)) {
    const auto record = nlohmann::json::parse(line, nullptr, false);
    if (!record.is_object() || !record.contains("iteration") ||
        !record["iteration"].is_number_integer() ||
        record["iteration"].get<std::int64_t>() > iteration) {
      continue;
    }
    kept += line + '\n';
    if (record.contains("wall_time") && record["wall_time"].is_number()) {
      wall_time = std::max(wall_time, record["wall_time"].get<double>());
    }
  }
  in.close();
  write_file_atomically(path, kept);
  return wall_time;
}

std::optional<std::int64_t> last_logged_iteration(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::optional<std::int64_t> last;
  std::string line;
  while (std::getline(in, line)) {
    const auto record = nlohmann::json::parse(line, nullptr, false);
    if (record.is_object() && record.contains("iteration") &&
        record["iteration"].is_number_integer()) {
      last = std::max(last.value_or(0), record["iteration"].get<std::int64_t>());
    }
  }
  return last;
}

double RunDirectory::rewind_log(std::int64_t iteration) {
  SGP_ENFORCE(!log_.is_open(), "rewind the log before writing to it");
  return rewind_jsonl(log_path(), iteration);
}

void RunDirectory::log(const nlohmann::json& record) {
  if (!log_.is_open()) {
    log_.open(log_path(), std::ios::app);
    if (!log_) {
      throw IoError(fmt::format("{}: cannot open for writing: {}", log_path(), errno_text(errno)));
    }
  }
  log_ << record.dump() << '\n';
  log_.flush();
  if (!log_) throw IoError(fmt::format("{}: cannot write: {}", log_path(), errno_text(errno)));
}

}  // namespace sgp::run
