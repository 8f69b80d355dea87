#include "sgp/launch/keygen.hpp"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/std.h>

#include "sgp/error.hpp"
#include "sgp/run/run_directory.hpp"
#include "sgp/topology/dot_file.hpp"
#include "sgp/transport/curve.hpp"

namespace sgp::launch {
namespace {

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) throw InputError(fmt::format("{}: cannot read the topology file", path));
  return text.str();
}

// Creates the keys directory (0700) when missing; refuses one that already holds any key file of
// this run, before anything is written (no half-keyed directory).
void prepare_keys_dir(const std::filesystem::path& dir, int num_peers) {
  std::error_code ec;
  if (std::filesystem::create_directories(dir, ec)) {
    std::filesystem::permissions(dir, std::filesystem::perms::owner_all, ec);
  }
  if (ec) throw IoError(fmt::format("--keys {}: cannot create it: {}", dir, ec.message()));
  for (int r = -1; r < num_peers; ++r) {
    const std::string name = r < 0 ? "monitor" : fmt::format("peer-{}", r);
    for (const char* ext : {".key", ".pub"}) {
      if (std::filesystem::exists(dir / (name + ext), ec)) {
        throw InputError(fmt::format(
            "{}: already exists; keys are never overwritten (remove the old keys, or choose "
            "another --keys directory)",
            dir / (name + ext)));
      }
    }
  }
}

// The input text with node statements that add each public key, and the monitor's key, before
// the closing brace: Graphviz merges a repeated node's attributes, so the rest of the file (its
// comments, weights and layout) stays exactly as written.
std::string with_keys(const std::string& text, const std::filesystem::path& source,
                      const std::vector<transport::CurveKeyPair>& peers,
                      const transport::CurveKeyPair& monitor) {
  const auto close = text.rfind('}');
  if (close == std::string::npos) throw InputError(fmt::format("{}: no closing brace", source));
  std::string keys = "  // CURVE public keys (sgp keygen)\n";
  keys += fmt::format("  monitor_public_key=\"{}\";\n", monitor.public_key);
  for (std::size_t r = 0; r < peers.size(); ++r) {
    keys += fmt::format("  {} [public_key=\"{}\"];\n", r, peers[r].public_key);
  }
  return text.substr(0, close) + keys + text.substr(close);
}

}  // namespace

void make_keys(const KeygenOptions& o) {
  const std::string text = read_text(o.topology);
  const auto schedule = topology::parse_dot(text, o.topology.string());
  if (schedule.has_public_keys()) {
    throw InputError(fmt::format(
        "{}: already has public keys; give the topology without keys (or keep using these)",
        o.topology));
  }
  const int n = schedule.num_peers();
  prepare_keys_dir(o.keys_dir, n);
  std::vector<transport::CurveKeyPair> peers;
  for (int r = 0; r < n; ++r) peers.push_back(transport::generate_curve_keypair());
  const auto monitor = transport::generate_curve_keypair();
  const std::string keyed = with_keys(text, o.topology, peers, monitor);
  // The output must read back with exactly these keys (e.g. a '}' in a trailing comment would
  // put them in the wrong place): check before any key is written.
  std::vector<std::string> expected;
  for (const auto& keys : peers) expected.push_back(keys.public_key);
  const auto check = topology::parse_dot(keyed, o.out.string());
  if (check.public_keys() != expected || check.monitor_public_key() != monitor.public_key) {
    throw InputError(fmt::format("{}: could not add the keys to this file's text", o.topology));
  }
  for (int r = 0; r < n; ++r) {
    transport::write_curve_keypair(o.keys_dir, fmt::format("peer-{}", r), peers[r]);
  }
  transport::write_curve_keypair(o.keys_dir, "monitor", monitor);
  run::write_file_atomically(o.out, keyed);
  spdlog::info("{} keypairs (peer-0 .. peer-{}, monitor) in {}; keyed topology {}", n + 1, n - 1,
               o.keys_dir, o.out);
}

}  // namespace sgp::launch
