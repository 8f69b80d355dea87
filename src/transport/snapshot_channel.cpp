#include "sgp/transport/snapshot_channel.hpp"

#include <cerrno>

#include <vector>
#include <zmq.hpp>

#include <fmt/format.h>

#include "listener_limits.hpp"
#include "sgp/error.hpp"
#include "zap_handler.hpp"

namespace sgp::transport {

namespace {
// At most this many snapshots wait per link; beyond that the newest is dropped, not waited for.
constexpr int kSnapshotHwm = 4;
// A peer that exits still gets this long to deliver its last snapshot.
constexpr int kSnapshotLingerMs = 2000;
}  // namespace

struct SnapshotSender::Socket {
  zmq::context_t context{1};
  zmq::socket_t socket{context, zmq::socket_type::push};
};

SnapshotSender::SnapshotSender(const std::string& endpoint, const std::optional<CurveClient>& curve,
                               const std::optional<PlainClient>& plain)
    : socket_(std::make_unique<Socket>()) {
  if (curve) {
    socket_->socket.set(zmq::sockopt::curve_serverkey, curve->server_public_key);
    socket_->socket.set(zmq::sockopt::curve_publickey, curve->own.public_key);
    socket_->socket.set(zmq::sockopt::curve_secretkey, curve->own.secret_key);
  } else if (plain) {
    socket_->socket.set(zmq::sockopt::plain_username, std::to_string(plain->rank));
    socket_->socket.set(zmq::sockopt::plain_password, plain->password);
  }
  socket_->socket.set(zmq::sockopt::sndhwm, kSnapshotHwm);
  socket_->socket.set(zmq::sockopt::linger, kSnapshotLingerMs);
  // Queue only to a monitor that is actually connected; with none, drop at once.
  socket_->socket.set(zmq::sockopt::immediate, 1);
  try {
    socket_->socket.connect(endpoint);
  } catch (const zmq::error_t& e) {
    throw InputError(fmt::format("--monitor: cannot use '{}': {}", endpoint, e.what()));
  }
}

SnapshotSender::~SnapshotSender() = default;

bool SnapshotSender::try_send(std::span<const std::byte> header, std::span<const std::byte> payload,
                              bool wait_for_monitor) {
  try {
    if (wait_for_monitor) {  // with ZMQ_IMMEDIATE, writable = a monitor is connected
      zmq::pollitem_t item{socket_->socket.handle(), 0, ZMQ_POLLOUT, 0};
      zmq::poll(&item, 1, std::chrono::milliseconds(kSnapshotLingerMs));
    }
    zmq::message_t head(header.data(), header.size());
    zmq::message_t body(payload.data(), payload.size());
    if (!socket_->socket.send(head, zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
      ++dropped_;
      return false;
    }
    // A PUSH socket accepts the rest of a multipart message once its first frame is queued.
    socket_->socket.send(body, zmq::send_flags::none);
    return true;
  } catch (const zmq::error_t&) {
    ++dropped_;
    return false;
  }
}

// As in ZmqTransport: the socket closes before its ZAP handler stops.
struct SnapshotReceiver::Socket {
  zmq::context_t context{1};
  std::unique_ptr<ZapHandler> zap;
  zmq::socket_t socket{context, zmq::socket_type::pull};
};

SnapshotReceiver::SnapshotReceiver(const std::string& endpoint,
                                   const std::optional<CurveServer>& curve,
                                   const std::optional<PlainServer>& plain)
    : socket_(std::make_unique<Socket>()), authenticated_(curve || plain) {
  socket_->socket.set(zmq::sockopt::linger, 0);
  limit_listener(socket_->socket);
  if (curve) {
    socket_->zap = std::make_unique<ZapHandler>(socket_->context, curve->admitted, "monitor");
    socket_->socket.set(zmq::sockopt::curve_server, true);
    socket_->socket.set(zmq::sockopt::curve_secretkey, curve->own.secret_key);
  } else if (plain) {
    socket_->zap = std::make_unique<ZapHandler>(socket_->context, *plain, "monitor");
    socket_->socket.set(zmq::sockopt::plain_server, true);
  }
  if (authenticated_) socket_->socket.set(zmq::sockopt::zap_domain, "sgp");
  try {
    socket_->socket.bind(endpoint);
  } catch (const zmq::error_t& e) {
    throw IoError(fmt::format("monitor: cannot bind {}: {}", endpoint, e.what()));
  }
  endpoint_ = socket_->socket.get(zmq::sockopt::last_endpoint);
}

SnapshotReceiver::~SnapshotReceiver() = default;

std::uint64_t SnapshotReceiver::refused_connections() const {
  return socket_->zap ? socket_->zap->refused() : 0;
}

std::optional<Message> SnapshotReceiver::receive(std::chrono::milliseconds timeout) {
  zmq::pollitem_t item{socket_->socket.handle(), 0, ZMQ_POLLIN, 0};
  try {
    if (zmq::poll(&item, 1, timeout) == 0) return std::nullopt;
  } catch (const zmq::error_t& e) {
    // A signal (Ctrl-C) interrupted the wait: nothing arrived; the caller decides whether to stop.
    if (e.num() == EINTR) return std::nullopt;
    throw;
  }
  auto parts = std::make_shared<std::vector<zmq::message_t>>();
  do {
    parts->emplace_back();
    (void)socket_->socket.recv(parts->back(), zmq::recv_flags::none);
  } while (parts->back().more());
  const std::optional<int> sender =
      authenticated_ ? std::optional<int>(authenticated_rank(parts->front())) : std::nullopt;
  std::vector<std::span<const std::byte>> frames;
  for (auto& part : *parts) {
    frames.emplace_back(static_cast<const std::byte*>(part.data()), part.size());
  }
  return Message(std::move(frames), std::move(parts), sender);
}

}  // namespace sgp::transport
