#pragma once
// The ZAP handler (ZeroMQ RFC 27) of one ZeroMQ context: the authority its CURVE or PLAIN server
// sockets ask whether a client may connect. It binds inproc://zeromq.zap.01 (one per context),
// and answers from its own thread: a known CURVE key, or a PLAIN user name (a rank) with that
// rank's password, is admitted with User-Id = the rank, which ZeroMQ attaches to every message
// of that connection; anything else is refused and counted.
//
// Lifetime: construct it BEFORE the context's server sockets bind (without a handler ZeroMQ
// admits every client), destroy it AFTER they are closed.
#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "sgp/transport/plain.hpp"

namespace sgp::transport {

class ZapHandler {
 public:
  // admitted: Z85 public key -> rank. `owner` names this process in log lines ("rank 3").
  ZapHandler(zmq::context_t& context, const std::map<std::string, int>& admitted,
             std::string owner);
  // PLAIN: admits user name "<rank>" with plain.admitted[rank] as its password.
  ZapHandler(zmq::context_t& context, const PlainServer& plain, std::string owner);
  ~ZapHandler();
  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;

  std::uint64_t refused() const { return refused_.load(); }

 private:
  using Key = std::array<std::uint8_t, 32>;
  void start();
  void serve();
  bool answer();
  // The rank a request's credentials belong to, or -1.
  int admitted_rank(const std::vector<zmq::message_t>& request) const;

  zmq::socket_t socket_;
  std::map<Key, int> admitted_;       // CURVE: public key -> rank
  std::optional<PlainServer> plain_;  // PLAIN instead of CURVE
  std::string owner_;
  int stop_fd_ = -1;
  std::atomic<std::uint64_t> refused_{0};
  std::thread thread_;
};

// The rank the ZAP handler authenticated a received message's connection with (its User-Id);
// -1, which no sender has, when the message carries none.
int authenticated_rank(zmq::message_t& frame);

}  // namespace sgp::transport
