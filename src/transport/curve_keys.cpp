#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <fmt/std.h>

#include "sgp/error.hpp"
#include "sgp/transport/curve.hpp"

namespace sgp::transport {
namespace {

constexpr std::size_t kZ85KeyChars = 40;

// Creates `path` exclusively (never replacing a file) with `mode`, and writes `text`.
void write_new_file(const std::filesystem::path& path, const std::string& text, mode_t mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0 && errno == EEXIST) {
    throw InputError(
        fmt::format("{}: already exists; keys are never overwritten (remove the old "
                    "keys, or choose another --keys directory)",
                    path));
  }
  if (fd < 0) throw IoError(fmt::format("{}: cannot create: {}", path, std::strerror(errno)));
  const bool ok = ::fchmod(fd, mode) == 0 &&  // whatever the umask
                  ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                  ::fsync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  if (!ok) throw IoError(fmt::format("{}: cannot write: {}", path, std::strerror(saved)));
}

}  // namespace

void write_secret_file(const std::filesystem::path& path, const std::string& text) {
  write_new_file(path, text, 0600);
}

CurveKeyPair generate_curve_keypair() {
  char public_key[kZ85KeyChars + 1] = {}, secret_key[kZ85KeyChars + 1] = {};
  if (zmq_curve_keypair(public_key, secret_key) != 0) {
    throw IoError(fmt::format("cannot make a CURVE keypair: {} (libzmq built without CURVE?)",
                              zmq_strerror(zmq_errno())));
  }
  return {public_key, secret_key};
}

void write_curve_keypair(const std::filesystem::path& dir, const std::string& name,
                         const CurveKeyPair& keys) {
  const auto secret = dir / (name + ".key");
  const auto pub = dir / (name + ".pub");
  for (const auto& path : {secret, pub}) {
    std::error_code ec;
    if (std::filesystem::exists(path, ec)) {
      throw InputError(
          fmt::format("{}: already exists; keys are never overwritten (remove the old keys, or "
                      "choose another --keys directory)",
                      path));
    }
  }
  write_secret_file(secret, keys.secret_key + "\n");
  write_new_file(pub, keys.public_key + "\n", 0644);
}

CurveKeyPair read_curve_keypair(const std::filesystem::path& dir, const std::string& name) {
  const auto path = dir / (name + ".key");
  std::ifstream in(path);
  if (!in) {
    throw InputError(
        fmt::format("{}: cannot read this process's secret key (made by `sgp keygen "
                    "--keys {}`)",
                    path, dir));
  }
  std::string secret;
  std::getline(in, secret);
  char public_key[kZ85KeyChars + 1] = {};
  if (secret.size() != kZ85KeyChars || zmq_curve_public(public_key, secret.c_str()) != 0) {
    throw InputError(fmt::format(
        "{}: not a CURVE secret key (expected 40 Z85 characters on the first line)", path));
  }
  return {public_key, secret};
}

}  // namespace sgp::transport
