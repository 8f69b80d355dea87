#include "sgp/peer/checkpoint_store.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>

#include <fmt/format.h>
#include <fmt/std.h>

#include "sgp/error.hpp"
#include "sgp/peer/run_directory.hpp"

namespace sgp::peer {

namespace {

constexpr char kMagic[8] = {'S', 'G', 'P', 'C', 'K', 'P', 'T', '1'};
constexpr std::uint32_t kVersion = 1;

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
  std::uint64_t checksum;
};
#pragma pack(pop)

std::uint64_t fnv1a(const std::vector<float>& a, const std::vector<float>& b) {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (const auto* v : {&a, &b}) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(v->data());
    for (std::size_t i = 0; i < v->size() * sizeof(float); ++i) {
      hash = (hash ^ bytes[i]) * 0x100000001b3ull;
    }
  }
  return hash;
}

// checkpoint-<rank>-<iteration>.bin
const std::regex& file_pattern() {
  static const std::regex pattern(R"(checkpoint-(\d+)-(\d+)\.bin)");
  return pattern;
}

}  // namespace

CheckpointStore::CheckpointStore(std::filesystem::path dir, int rank, int keep)
    : dir_(std::move(dir)), rank_(rank), keep_(std::max(2, keep)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) throw InputError(fmt::format("checkpoint directory {}: {}", dir_, ec.message()));
}

std::filesystem::path CheckpointStore::file(std::int64_t iteration) const {
  return dir_ / fmt::format("checkpoint-{}-{}.bin", rank_, iteration);
}

void CheckpointStore::save(const CheckpointState& s) {
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kVersion;
  h.rank = static_cast<std::uint32_t>(rank_);
  h.iteration = s.iteration;
  h.epoch = s.epoch;
  h.position = s.position;
  h.weight = s.weight;
  h.n_x = s.x.size();
  h.n_velocity = s.velocity.size();
  h.checksum = fnv1a(s.x, s.velocity);
  std::string bytes(reinterpret_cast<const char*>(&h), sizeof h);
  bytes.append(reinterpret_cast<const char*>(s.x.data()), s.x.size() * sizeof(float));
  bytes.append(reinterpret_cast<const char*>(s.velocity.data()), s.velocity.size() * sizeof(float));
  write_file_atomically(file(s.iteration), bytes);

  auto iterations = available();
  while (iterations.size() > static_cast<std::size_t>(keep_)) {
    std::error_code ec;
    std::filesystem::remove(file(iterations.front()), ec);
    iterations.erase(iterations.begin());
  }
}

std::vector<std::int64_t> CheckpointStore::available() const {
  std::vector<std::int64_t> iterations;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (std::regex_match(name, m, file_pattern()) && std::stoi(m[1]) == rank_) {
      iterations.push_back(std::stoll(m[2]));
    }
  }
  std::sort(iterations.begin(), iterations.end());
  return iterations;
}

CheckpointState CheckpointStore::load(std::int64_t iteration) const {
  const auto path = file(iteration);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open checkpoint", path));
  Header h{};
  if (!in.read(reinterpret_cast<char*>(&h), sizeof h)) {
    throw InputError(fmt::format("{}: truncated checkpoint header", path));
  }
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.version != kVersion) {
    throw InputError(fmt::format("{}: not an sgp checkpoint (version {})", path, kVersion));
  }
  if (h.rank != static_cast<std::uint32_t>(rank_) || h.iteration != iteration) {
    throw InputError(fmt::format("{}: holds rank {} iteration {}, expected rank {} iteration {}",
                                 path, h.rank, h.iteration, rank_, iteration));
  }
  const auto expected = std::filesystem::file_size(path);
  if (expected != sizeof h + (h.n_x + h.n_velocity) * sizeof(float)) {
    throw InputError(fmt::format("{}: size {} does not match its header ({} + {} floats)", path,
                                 expected, h.n_x, h.n_velocity));
  }
  CheckpointState s;
  s.iteration = h.iteration;
  s.epoch = h.epoch;
  s.position = h.position;
  s.weight = h.weight;
  s.x.resize(h.n_x);
  s.velocity.resize(h.n_velocity);
  in.read(reinterpret_cast<char*>(s.x.data()), static_cast<std::streamsize>(h.n_x * sizeof(float)));
  in.read(reinterpret_cast<char*>(s.velocity.data()),
          static_cast<std::streamsize>(h.n_velocity * sizeof(float)));
  if (!in || fnv1a(s.x, s.velocity) != h.checksum) {
    throw InputError(fmt::format("{}: checksum mismatch: the checkpoint is damaged", path));
  }
  return s;
}

std::optional<std::int64_t> latest_complete_checkpoint(const std::filesystem::path& dir,
                                                       int num_peers) {
  std::map<std::int64_t, std::set<int>> ranks_at;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (std::regex_match(name, m, file_pattern())) {
      ranks_at[std::stoll(m[2])].insert(std::stoi(m[1]));
    }
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
