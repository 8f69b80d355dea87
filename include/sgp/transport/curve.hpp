#pragma once
// CURVE security for the ZeroMQ sockets (ZeroMQ RFC 26: CurveZMQ, over libsodium): keys, key
// files, and who may connect to whom. A CURVE server (the socket that binds: a peer's PULL, the
// monitor's) has a keypair; a client (each PUSH) has its own keypair and knows the server's public
// key. The server admits a client only if a ZAP handler (RFC 27) of its process knows the
// client's public key, and tags every message from that connection with the client's rank
// (Message::authenticated_rank). Traffic is encrypted and authenticated per connection.
//
// Key files (`sgp keygen`): <dir>/<name>.key holds the secret key (mode 0600), <dir>/<name>.pub
// the public key, each as 40 Z85 characters and a newline; name = "peer-<rank>" or "monitor".
#include <filesystem>
#include <map>
#include <string>

namespace sgp::transport {

struct CurveKeyPair {
  std::string public_key;  // Z85, 40 characters
  std::string secret_key;  // Z85, 40 characters
};

// A fresh keypair from libsodium's random generator.
CurveKeyPair generate_curve_keypair();

// Writes <dir>/<name>.key (created with mode 0600) and <dir>/<name>.pub. Never overwrites: an
// InputError naming the file when either exists. IoError when a file cannot be written.
void write_curve_keypair(const std::filesystem::path& dir, const std::string& name,
                         const CurveKeyPair& keys);
// Creates `path` exclusively (never replacing a file) with mode 0600 and writes `text`: a secret
// (a key, a run's passwords). InputError when it exists, IoError when it cannot be written.
void write_secret_file(const std::filesystem::path& path, const std::string& text);

// Reads <dir>/<name>.key and derives its public key. InputError naming the file when it is
// missing, unreadable or not a Z85 secret key.
CurveKeyPair read_curve_keypair(const std::filesystem::path& dir, const std::string& name);

// A CURVE server: its keypair, and the clients it admits, public key -> rank (the User-Id its
// messages carry).
struct CurveServer {
  CurveKeyPair own;
  std::map<std::string, int> admitted;
};

// A CURVE client: its keypair and the server's public key.
struct CurveClient {
  CurveKeyPair own;
  std::string server_public_key;
};

}  // namespace sgp::transport
