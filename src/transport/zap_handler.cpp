#include "zap_handler.hpp"

#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <vector>

#include "sgp/error.hpp"

namespace sgp::transport {
namespace {

constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";
// Refusals logged one by one; beyond that they are only counted (a flood must not flood the log).
constexpr std::uint64_t kLoggedRefusals = 5;

std::string frame_text(const zmq::message_t& m) { return std::string(m.data<char>(), m.size()); }

}  // namespace

ZapHandler::ZapHandler(zmq::context_t& context, const std::map<std::string, int>& admitted,
                       std::string owner)
    : socket_(context, zmq::socket_type::rep), owner_(std::move(owner)) {
  for (const auto& [z85, rank] : admitted) {
    Key key{};
    SGP_ENFORCE(z85.size() == 40 && zmq_z85_decode(key.data(), z85.c_str()) != nullptr,
                "'{}' is not a Z85 CURVE key", z85);
    admitted_.emplace(key, rank);
  }
  socket_.set(zmq::sockopt::linger, 0);
  try {
    socket_.bind(kZapEndpoint);
  } catch (const zmq::error_t& e) {
    throw IoError(
        fmt::format("{}: cannot start the CURVE authentication handler: {}", owner_, e.what()));
  }
  stop_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (stop_fd_ < 0) throw IoError(fmt::format("eventfd: {}", std::strerror(errno)));
  thread_ = std::thread([this] { serve(); });
}

ZapHandler::~ZapHandler() {
  const std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(stop_fd_, &one, sizeof one);
  thread_.join();
  socket_.close();
  ::close(stop_fd_);
}

void ZapHandler::serve() {
  zmq::pollitem_t items[] = {{socket_.handle(), 0, ZMQ_POLLIN, 0},
                             {nullptr, stop_fd_, ZMQ_POLLIN, 0}};
  try {
    for (;;) {
      zmq::poll(items, 2, std::chrono::milliseconds(-1));
      if (items[1].revents & ZMQ_POLLIN) return;
      if (items[0].revents & ZMQ_POLLIN) answer();
    }
  } catch (const zmq::error_t& e) {
    // Without an answer, pending handshakes fail: nobody unauthenticated gets in.
    if (e.num() != ETERM)
      spdlog::error("{}: CURVE authentication handler stopped: {}", owner_, e.what());
  }
}

// One request: version, request id, domain, address, identity, mechanism, credentials...
bool ZapHandler::answer() {
  std::vector<zmq::message_t> request;
  do {
    request.emplace_back();
    if (!socket_.recv(request.back(), zmq::recv_flags::dontwait)) return false;
  } while (request.back().more());
  auto it = admitted_.end();
  if (request.size() >= 7 && frame_text(request[5]) == "CURVE" && request[6].size() == 32) {
    Key key{};
    std::memcpy(key.data(), request[6].data(), key.size());
    it = admitted_.find(key);
  }
  const bool ok = it != admitted_.end();
  const std::string address = request.size() > 3 ? frame_text(request[3]) : "?";
  if (!ok && refused_.fetch_add(1) < kLoggedRefusals) {
    spdlog::warn("{}: refused a connection from {}: its CURVE key is not one this process admits",
                 owner_, address);
  }
  const std::string user_id = ok ? std::to_string(it->second) : "";
  const std::string reply[] = {request.empty() ? "1.0" : frame_text(request[0]),
                               request.size() > 1 ? frame_text(request[1]) : "",
                               ok ? "200" : "400",
                               ok ? "OK" : "key not admitted",
                               user_id,
                               ""};
  for (std::size_t i = 0; i < std::size(reply); ++i) {
    socket_.send(zmq::buffer(reply[i]),
                 i + 1 < std::size(reply) ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
  return ok;
}

int authenticated_rank(zmq::message_t& first_frame) {
  const char* user_id = nullptr;
  try {
    user_id = first_frame.gets("User-Id");
  } catch (const zmq::error_t&) {
    return -1;
  }
  int rank = -1;
  const char* end = user_id + std::strlen(user_id);
  const auto [ptr, ec] = std::from_chars(user_id, end, rank);
  return ec == std::errc() && ptr == end ? rank : -1;
}

}  // namespace sgp::transport
