#include "sgp/transport/zmq_transport.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "listener_limits.hpp"
#include "sgp/endpoint.hpp"
#include "sgp/error.hpp"
#include "zap_handler.hpp"

namespace sgp::transport {

// Members are destroyed bottom-up: the sockets close before the ZAP handler stops (a server socket
// without its handler would admit anyone), and the context goes last.
struct ZmqTransport::Sockets {
  zmq::context_t context;
  std::unique_ptr<ZapHandler> zap;
  zmq::socket_t pull;
  std::map<int, zmq::socket_t> push;
  explicit Sockets(int io_threads) : context(io_threads), pull(context, zmq::socket_type::pull) {}
};

namespace {

// ZeroMQ's free callback for zero-copy payloads: runs the sender's release function once.
void release_payload(void* /*data*/, void* hint) noexcept {
  auto* fn = static_cast<ReleaseFn*>(hint);
  try {
    (*fn)();
  } catch (...) {
    // A release function must not throw; nothing sensible can be done on ZeroMQ's thread.
  }
  delete fn;
}

int ms(std::chrono::milliseconds d) { return static_cast<int>(d.count()); }

// "tcp://HOST:PORT" with a port number and no source interface (nothing otherwise, e.g. for a
// wildcard port): what has a local ipc twin.
std::optional<Endpoint> tcp_with_port(const std::string& endpoint) {
  auto e = Endpoint::parse(endpoint);
  if (!e || !e->has_port_number() || !e->source.empty()) return std::nullopt;
  return e;
}

// Only numeric 127.x: ZMQ_LAST_ENDPOINT names the bound host numerically, so "localhost" on the
// connecting side would not name the same ipc endpoint (it goes over TCP).
bool is_loopback_host(const std::string& host) { return host.starts_with("127."); }

}  // namespace

ZmqTransport::ZmqTransport(int rank, const std::string& bind_endpoint, ReceiveLimits limits,
                           ZmqOptions options)
    : rank_(rank), options_(std::move(options)) {
  SGP_ENFORCE(options_.io_threads >= 1, "ZeroMQ needs at least one I/O thread");
  SGP_ENFORCE(limits.max_frame_bytes > 0 && limits.max_queued_messages > 0,
              "receive limits must be positive, got {} bytes and {} messages",
              limits.max_frame_bytes, limits.max_queued_messages);
  sockets_ = std::make_unique<Sockets>(options_.io_threads);
  auto& pull = sockets_->pull;
  pull.set(zmq::sockopt::rcvhwm, limits.max_queued_messages);
  // With CURVE, ZeroMQ checks the size of the encrypted frame, which carries a MESSAGE command,
  // a nonce and an authenticator (33 bytes) besides the data, and of the handshake's commands
  // (INITIATE: 257 bytes and metadata).
  constexpr std::int64_t kCurveFrameOverhead = 64, kCurveHandshakeBytes = 1024;
  pull.set(zmq::sockopt::maxmsgsize,
           options_.curve
               ? std::max(limits.max_frame_bytes + kCurveFrameOverhead, kCurveHandshakeBytes)
               : limits.max_frame_bytes);
  pull.set(zmq::sockopt::linger, 0);  // nothing is ever sent on it
  limit_listener(pull);
  if (options_.curve) {
    sockets_->zap = std::make_unique<ZapHandler>(sockets_->context, options_.curve->admitted,
                                                 fmt::format("rank {}", rank));
    pull.set(zmq::sockopt::curve_server, true);
    pull.set(zmq::sockopt::curve_secretkey, options_.curve->own.secret_key);
    pull.set(zmq::sockopt::zap_domain, "sgp");
  } else if (options_.plain) {
    sockets_->zap = std::make_unique<ZapHandler>(sockets_->context, options_.plain->server,
                                                 fmt::format("rank {}", rank));
    pull.set(zmq::sockopt::plain_server, true);
    pull.set(zmq::sockopt::zap_domain, "sgp");
  }
  try {
    pull.set(zmq::sockopt::use_fd, options_.listen_fd);
    pull.bind(bind_endpoint);
    pull.set(zmq::sockopt::use_fd, -1);  // not for the ipc endpoint beside it
  } catch (const zmq::error_t& e) {
    throw IoError(fmt::format(
        "rank {}: cannot bind the receive socket at '{}': {}{}", rank, bind_endpoint, e.what(),
        e.num() == EADDRINUSE ? " (another process holds that port: give the topology other "
                                "ports, or port 0 for sgp launch to pick free ones, e.g. "
                                "sgp launch --base-port 0)"
                              : ""));
  }
  endpoint_ = pull.get(zmq::sockopt::last_endpoint);
  if (const auto bound = tcp_with_port(endpoint_)) bound_host_ = bound->host;
  if (options_.local_ipc) bind_local_ipc();
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) throw IoError(fmt::format("eventfd: {}", std::strerror(errno)));
}

std::string local_ipc_endpoint(const std::string& tcp) {
  const auto e = tcp_with_port(tcp);
  if (!e) return {};
  return fmt::format("ipc://@sgp-{}-{}", e->host, e->port);
}

// The second listening endpoint of the PULL socket, for peers of this host (header).
void ZmqTransport::bind_local_ipc() {
  const auto bound = tcp_with_port(endpoint_);
  if (!bound) return;
  const std::string ipc = local_ipc_endpoint(endpoint_);
  try {
    sockets_->pull.bind(ipc);
  } catch (const zmq::error_t& e) {
    throw IoError(
        fmt::format("rank {}: cannot bind the local receive socket at '{}' (beside {}): {}", rank_,
                    ipc, endpoint_, e.what()));
  }
}

ZmqTransport::~ZmqTransport() {
  // Closing the PUSH sockets lets queued messages go out for up to LINGER; the context's
  // destructor waits for that, and every payload's free callback has run when it returns.
  sockets_.reset();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void ZmqTransport::connect(int dest, const std::string& endpoint) {
  SGP_ENFORCE(!sockets_->push.contains(dest), "rank {}: already connected to rank {}", rank_, dest);
  zmq::socket_t socket(sockets_->context, zmq::socket_type::push);
  socket.set(zmq::sockopt::sndhwm, options_.send_hwm);
  socket.set(zmq::sockopt::sndtimeo, ms(options_.send_timeout));
  socket.set(zmq::sockopt::linger, ms(options_.linger));
  if (options_.curve) {
    const auto key = options_.curve->server_keys.find(dest);
    SGP_ENFORCE(key != options_.curve->server_keys.end(), "rank {}: no CURVE key for rank {}",
                rank_, dest);
    socket.set(zmq::sockopt::curve_serverkey, key->second);
    socket.set(zmq::sockopt::curve_publickey, options_.curve->own.public_key);
    socket.set(zmq::sockopt::curve_secretkey, options_.curve->own.secret_key);
  } else if (options_.plain) {
    const auto password = options_.plain->passwords.find(dest);
    SGP_ENFORCE(password != options_.plain->passwords.end(),
                "rank {}: no PLAIN password for rank {}", rank_, dest);
    socket.set(zmq::sockopt::plain_username, std::to_string(rank_));
    socket.set(zmq::sockopt::plain_password, password->second);
  }
  // A peer of this host: over its ipc endpoint (a loopback address is this network namespace's;
  // so is the address this transport is bound to).
  const auto tcp = tcp_with_port(endpoint);
  const bool local_tcp =
      tcp && (is_loopback_host(tcp->host) || (!bound_host_.empty() && tcp->host == bound_host_));
  if (local_tcp || endpoint.starts_with("ipc://")) same_host_.insert(dest);
  try {
    socket.connect(options_.local_ipc && local_tcp ? local_ipc_endpoint(endpoint) : endpoint);
  } catch (const zmq::error_t& e) {
    throw IoError(fmt::format("rank {}: cannot connect to rank {} at '{}': {}", rank_, dest,
                              endpoint, e.what()));
  }
  sockets_->push.emplace(dest, std::move(socket));
}

void ZmqTransport::send(int dest, std::span<const std::byte> header,
                        std::span<const std::byte> payload, ReleaseFn on_release) {
  // Wrap the payload first, so that every exit path below releases it exactly once.
  zmq::message_t body;
  if (payload.empty()) {
    if (on_release) on_release();
  } else {
    body = zmq::message_t(const_cast<std::byte*>(payload.data()), payload.size(), &release_payload,
                          new ReleaseFn(std::move(on_release)));
  }
  if (discarded_.contains(dest)) {
    throw IoError(fmt::format("rank {}: the link to rank {} was given up", rank_, dest));
  }
  auto it = sockets_->push.find(dest);
  SGP_ENFORCE(it != sockets_->push.end(), "rank {}: send to rank {}, which was never connected",
              rank_, dest);
  zmq::message_t head(header.data(), header.size());
  const std::size_t bytes = head.size() + body.size();
  try {
    // The first frame is where the high-water mark applies; the parts travel atomically.
    if (!it->second.send(head, zmq::send_flags::sndmore)) {
      throw IoError(fmt::format(
          "rank {}: could not queue a message for rank {} within {} ms (its queue of {} messages "
          "is full: the peer is not reading)",
          rank_, dest, options_.send_timeout.count(), options_.send_hwm));
    }
    it->second.send(body, zmq::send_flags::none);
    bytes_sent_.fetch_add(bytes, std::memory_order_relaxed);
  } catch (const zmq::error_t& e) {
    throw IoError(fmt::format("rank {}: send to rank {} failed: {}", rank_, dest, e.what()));
  }
}

std::optional<Message> ZmqTransport::receive(std::chrono::milliseconds timeout) {
  // The socket may signal readable while nothing whole is there yet (e.g. during a CURVE
  // handshake): wait again until the deadline.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (auto left = timeout; wait_readable(left);) {
    if (auto message = read_message()) return message;
    left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
  }
  return std::nullopt;
}

bool ZmqTransport::wait_readable(std::chrono::milliseconds timeout) {
  zmq::pollitem_t items[] = {{sockets_->pull.handle(), 0, ZMQ_POLLIN, 0},
                             {nullptr, wake_fd_, ZMQ_POLLIN, 0}};
  try {
    zmq::poll(items, 2, timeout);
  } catch (const zmq::error_t& e) {
    if (e.num() == EINTR) return false;
    throw IoError(fmt::format("rank {}: poll failed: {}", rank_, e.what()));
  }
  if (items[1].revents & ZMQ_POLLIN) {
    std::uint64_t count = 0;
    [[maybe_unused]] auto n = ::read(wake_fd_, &count, sizeof count);
  }
  return (items[0].revents & ZMQ_POLLIN) != 0;
}

std::optional<Message> ZmqTransport::read_message() {
  auto parts = std::make_shared<std::vector<zmq::message_t>>();
  try {
    do {
      zmq::message_t part;
      if (!sockets_->pull.recv(part, zmq::recv_flags::dontwait)) break;
      parts->push_back(std::move(part));
    } while (parts->back().more());
  } catch (const zmq::error_t& e) {
    throw IoError(fmt::format("rank {}: receive failed: {}", rank_, e.what()));
  }
  if (parts->empty()) return std::nullopt;
  const std::optional<int> sender = options_.curve || options_.plain
                                        ? std::optional<int>(authenticated_rank(parts->front()))
                                        : std::nullopt;
  // Spans are taken only now: a small message keeps its bytes inside message_t, which moves.
  std::vector<std::span<const std::byte>> frames;
  frames.reserve(parts->size());
  for (const auto& p : *parts) {
    frames.emplace_back(static_cast<const std::byte*>(p.data()), p.size());
  }
  return Message(std::move(frames), std::move(parts), sender);
}

void ZmqTransport::wake() {
  const std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof one);
}

void ZmqTransport::discard_pending(int dest) {
  discarded_.insert(dest);
  auto it = sockets_->push.find(dest);
  if (it == sockets_->push.end()) return;
  it->second.set(zmq::sockopt::linger, 0);  // queued messages are dropped (and released)
  it->second.close();
  sockets_->push.erase(it);
}

}  // namespace sgp::transport
