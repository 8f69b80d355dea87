#include "sgp/peer/checkpoint_store.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/std.h>

#include "sgp/error.hpp"
#include "sgp/fnv1a.hpp"
#include "sgp/peer/resume_settings.hpp"
#include "sgp/run/file_names.hpp"
#include "sgp/run/run_directory.hpp"

namespace sgp::peer {

namespace {

constexpr char kMagic[8] = {'S', 'G', 'P', 'C', 'K', 'P', 'T', '1'};
constexpr std::uint32_t kVersion = 2;
constexpr std::size_t kRunIdBytes = 32;
constexpr std::uint64_t kMaxSettingsBytes = 1 << 20;

#pragma pack(push, 1)
struct Header {
  char magic[8];
  std::uint32_t version;
  std::uint32_t rank;
  std::int64_t iteration;
  std::int64_t epoch;
  std::uint64_t position;
  double weight;
  std::uint64_t n_x;
  std::uint64_t n_velocity;
  char run_id[kRunIdBytes];
  std::uint64_t settings_bytes;
};
#pragma pack(pop)
static_assert(sizeof(Header) == 104);

template <class T>
void append(std::string& out, const T* data, std::size_t count) {
  out.append(reinterpret_cast<const char*>(data), count * sizeof(T));
}

std::string encode(const CheckpointState& s, int rank, const std::string& run_id,
                   const std::string& settings) {
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kVersion;
  h.rank = static_cast<std::uint32_t>(rank);
  h.iteration = s.iteration;
  h.epoch = s.epoch;
  h.position = s.position;
  h.weight = s.weight;
  h.n_x = s.x.size();
  h.n_velocity = s.velocity.size();
  SGP_ENFORCE(run_id.size() == kRunIdBytes, "run id '{}' is not {} characters", run_id,
              kRunIdBytes);
  std::memcpy(h.run_id, run_id.data(), kRunIdBytes);
  h.settings_bytes = settings.size();
  std::string bytes;
  append(bytes, &h, 1);
  bytes += settings;
  append(bytes, s.x.data(), s.x.size());
  append(bytes, s.velocity.data(), s.velocity.size());
  const std::uint64_t checksum = fnv1a(bytes);
  append(bytes, &checksum, 1);
  return bytes;
}

// The header of a file, when it has one of this version (nothing otherwise).
std::optional<Header> peek_header(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  Header h{};
  if (!in.read(reinterpret_cast<char*>(&h), sizeof h)) return std::nullopt;
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.version != kVersion) {
    return std::nullopt;
  }
  return h;
}

std::string run_id_of(const Header& h) { return std::string(h.run_id, kRunIdBytes); }

}  // namespace

CheckpointStore::CheckpointStore(std::filesystem::path dir, int rank, std::string run_id,
                                 nlohmann::json settings, int keep)
    : dir_(std::move(dir)),
      rank_(rank),
      run_id_(std::move(run_id)),
      settings_(std::move(settings)),
      keep_(std::max(2, keep)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) throw InputError(fmt::format("checkpoint directory {}: {}", dir_, ec.message()));
}

std::filesystem::path CheckpointStore::file(std::int64_t iteration) const {
  return dir_ / run::checkpoint_file_name(rank_, iteration);
}

void CheckpointStore::save(const CheckpointState& s) {
  run::write_file_atomically(file(s.iteration), encode(s, rank_, run_id_, settings_.dump()));
  prune();
}

CheckpointStore::Owner CheckpointStore::owner(const std::filesystem::path& path) const {
  const auto h = peek_header(path);
  if (!h) return Owner::unknown;
  return run_id_of(*h) == run_id_ ? Owner::this_run : Owner::other_run;
}

// Deletes this run's checkpoints of this rank beyond the newest keep_; never another run's.
void CheckpointStore::prune() const {
  std::vector<std::int64_t> ours;
  for (std::int64_t iteration : available()) {
    if (owner(file(iteration)) == Owner::this_run) ours.push_back(iteration);
  }
  for (std::size_t i = 0; i + keep_ < ours.size(); ++i) {
    std::error_code ec;
    std::filesystem::remove(file(ours[i]), ec);
  }
}

std::vector<std::int64_t> CheckpointStore::available() const {
  std::vector<std::int64_t> iterations;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    const auto name = run::parse_checkpoint_file_name(entry.path().filename().string());
    if (name && name->rank == rank_ && owner(entry.path()) != Owner::other_run) {
      iterations.push_back(name->iteration);
    }
  }
  std::sort(iterations.begin(), iterations.end());
  return iterations;
}

namespace {

[[noreturn]] void damaged(const std::filesystem::path& path, const std::string& what) {
  throw InputError(fmt::format("damaged checkpoint {}: {}", path.string(), what));
}

// The whole file, once its length matches what its header declares; the header is checked
// for magic and version.
std::string read_checkpoint_bytes(const std::filesystem::path& path, Header& h) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open checkpoint", path));
  std::error_code ec;
  const std::uint64_t length = std::filesystem::file_size(path, ec);
  if (ec || !in.read(reinterpret_cast<char*>(&h), sizeof h)) {
    damaged(path, fmt::format("{} bytes, shorter than a header", ec ? 0 : length));
  }
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) damaged(path, "not an sgp checkpoint");
  if (h.version == 1) {
    throw InputError(fmt::format(
        "{}: a version 1 checkpoint, written by an older sgp; this one reads version {} (resume "
        "it with the sgp that wrote it, or start again with --overwrite)",
        path.string(), kVersion));
  }
  if (h.version != kVersion) damaged(path, fmt::format("unknown version {}", h.version));
  const std::uint64_t limit = length / sizeof(float);
  if (h.n_x > limit || h.n_velocity > limit || h.settings_bytes > kMaxSettingsBytes ||
      length != sizeof h + h.settings_bytes + (h.n_x + h.n_velocity) * sizeof(float) + 8) {
    damaged(path, fmt::format("{} bytes do not match its header ({} + {} floats, {} bytes of "
                              "settings)",
                              length, h.n_x, h.n_velocity, h.settings_bytes));
  }
  std::string bytes(length, '\0');
  in.seekg(0);
  if (!in.read(bytes.data(), static_cast<std::streamsize>(length))) damaged(path, "read failed");
  std::uint64_t checksum = 0;
  std::memcpy(&checksum, bytes.data() + length - 8, 8);
  if (fnv1a(std::string_view(bytes).substr(0, length - 8)) != checksum) {
    damaged(path, "checksum mismatch");
  }
  return bytes;
}

void check_fields(const std::filesystem::path& path, const Header& h, int rank,
                  std::int64_t iteration) {
  if (h.rank != static_cast<std::uint32_t>(rank)) {
    damaged(path, fmt::format("holds rank {}, expected {}", h.rank, rank));
  }
  if (h.iteration != iteration) {
    damaged(path, fmt::format("holds iteration {}, its name says {}", h.iteration, iteration));
  }
  if (h.epoch < 0) damaged(path, fmt::format("epoch {} is negative", h.epoch));
  if (!std::isfinite(h.weight) || h.weight <= 0.0) {
    damaged(path, fmt::format("push-sum weight {} is not a positive number", h.weight));
  }
  const std::string id = run_id_of(h);
  if (id.find_first_not_of("0123456789abcdef") != std::string::npos) {
    damaged(path, "the run id is not hexadecimal");
  }
}

}  // namespace

CheckpointState CheckpointStore::load(std::int64_t iteration, std::optional<std::size_t> parameters,
                                      std::optional<std::size_t> state_values) const {
  const auto path = file(iteration);
  Header h{};
  const std::string bytes = read_checkpoint_bytes(path, h);
  check_fields(path, h, rank_, iteration);
  if (run_id_of(h) != run_id_) {
    throw InputError(fmt::format("{}: a checkpoint of run {}, not of this run ({})", path.string(),
                                 run_id_of(h), run_id_));
  }
  const char* at = bytes.data() + sizeof h;
  const auto settings = nlohmann::json::parse(at, at + h.settings_bytes, nullptr, false);
  if (!settings.is_object()) damaged(path, "its settings are not a JSON object");
  require_same_resume_settings(settings, settings_, "checkpoint " + path.string());
  const auto n_x = state_values ? state_values : parameters;
  if (parameters && (h.n_x != *n_x || h.n_velocity != *parameters)) {
    damaged(path, fmt::format("holds {} state values and {} velocities, this run keeps {} and {}",
                              h.n_x, h.n_velocity, *n_x, *parameters));
  }
  at += h.settings_bytes;
  CheckpointState s;
  s.iteration = h.iteration;
  s.epoch = h.epoch;
  s.position = h.position;
  s.weight = h.weight;
  // Not memcpy: an empty vector's data() may be null, and memcpy(null, p, 0) is undefined
  // behaviour (UBSan caught it on the seed with no values).
  auto floats_at = [](const char* from, std::uint64_t count) {
    std::vector<float> out(count);
    std::copy_n(from, count * sizeof(float), reinterpret_cast<char*>(out.data()));
    return out;
  };
  s.x = floats_at(at, h.n_x);
  s.velocity = floats_at(at + h.n_x * sizeof(float), h.n_velocity);
  return s;
}

std::optional<std::int64_t> latest_complete_checkpoint(const std::filesystem::path& dir,
                                                       int num_peers, const std::string& run_id) {
  std::map<std::int64_t, std::set<int>> ranks_at;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const auto name = run::parse_checkpoint_file_name(entry.path().filename().string());
    if (!name) continue;
    const auto h = peek_header(entry.path());
    if (!h || run_id_of(*h) == run_id) ranks_at[name->iteration].insert(name->rank);
  }
  for (auto it = ranks_at.rbegin(); it != ranks_at.rend(); ++it) {
    if (it->second.size() == static_cast<std::size_t>(num_peers) && *it->second.begin() == 0 &&
        *it->second.rbegin() == num_peers - 1) {
      return it->first;
    }
  }
  return std::nullopt;
}

}  // namespace sgp::peer
