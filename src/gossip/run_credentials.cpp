#include "sgp/gossip/run_credentials.hpp"

#include <sys/random.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/std.h>
#include <nlohmann/json.hpp>

#include "sgp/error.hpp"
#include "sgp/transport/curve.hpp"

namespace sgp::gossip {
namespace {

// 32 random bytes as 64 hexadecimal characters (PLAIN passwords are at most 255 bytes).
std::string random_password() {
  std::array<unsigned char, 32> bytes{};
  std::size_t filled = 0;
  while (filled < bytes.size()) {
    const ssize_t n = ::getrandom(bytes.data() + filled, bytes.size() - filled, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw IoError(fmt::format("getrandom: {}", std::strerror(errno)));
    filled += static_cast<std::size_t>(n);
  }
  std::string text;
  for (unsigned char b : bytes) text += fmt::format("{:02x}", b);
  return text;
}

}  // namespace

RunCredentialTable::RunCredentialTable(int num_peers, bool with_monitor) : num_peers_(num_peers) {
  for (int sender = 0; sender < num_peers; ++sender) {
    for (int receiver = with_monitor ? kMonitorRank : 0; receiver < num_peers; ++receiver) {
      if (receiver != sender) passwords_[{sender, receiver}] = random_password();
    }
  }
}

RunCredentials RunCredentialTable::of(int rank) const {
  SGP_ENFORCE(rank >= kMonitorRank && rank < num_peers_, "rank {} outside 0..{}", rank,
              num_peers_ - 1);
  RunCredentials share;
  share.rank = rank;
  for (const auto& [pair, password] : passwords_) {
    if (pair.first == rank) share.present[pair.second] = password;
    if (pair.second == rank) share.admit[pair.first] = password;
  }
  return share;
}

void write_run_credentials(const std::filesystem::path& path, const RunCredentials& c) {
  const nlohmann::json j{{"rank", c.rank}, {"present", c.present}, {"admit", c.admit}};
  transport::write_secret_file(path, j.dump() + "\n");
}

RunCredentials read_run_credentials(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) {
    throw InputError(fmt::format(
        "--run-credentials {}: cannot read it (sgp launch writes it for the peers it starts and "
        "removes it when the run ends)",
        path));
  }
  std::stringstream text;
  text << in.rdbuf();
  RunCredentials c;
  try {
    const auto j = nlohmann::json::parse(text.str());
    c.rank = j.at("rank").get<int>();
    c.present = j.at("present").get<std::map<int, std::string>>();
    c.admit = j.at("admit").get<std::map<int, std::string>>();
  } catch (const nlohmann::json::exception& e) {
    throw InputError(
        fmt::format("--run-credentials {}: not a credentials file: {}", path, e.what()));
  }
  return c;
}

std::filesystem::path run_credentials_file(const std::filesystem::path& run_dir, int rank) {
  return run_dir / ".credentials" / fmt::format("peer-{}.json", rank);
}

transport::PlainServer plain_server(const RunCredentials& credentials) {
  return {credentials.admit};
}

}  // namespace sgp::gossip
