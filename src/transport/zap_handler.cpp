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

// A password comparison whose time does not tell how many leading characters were right.
bool equal_in_constant_time(const std::string& given, const std::string& expected) {
  if (given.size() != expected.size()) return false;
  unsigned char difference = 0;
  for (std::size_t i = 0; i < given.size(); ++i)
    difference |= static_cast<unsigned char>(given[i] ^ expected[i]);
  return difference == 0;
}

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
  start();
}

ZapHandler::ZapHandler(zmq::context_t& context, const PlainServer& plain, std::string owner)
    : socket_(context, zmq::socket_type::rep), plain_(plain), owner_(std::move(owner)) {
  start();
}

void ZapHandler::start() {
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

// One request: answered 200 with the rank as User-Id, or 400.
bool ZapHandler::answer() {
  std::vector<zmq::message_t> request;
  do {
    request.emplace_back();
    if (!socket_.recv(request.back(), zmq::recv_flags::dontwait)) return false;
  } while (request.back().more());
  const int rank = admitted_rank(request);
  const bool ok = rank >= 0;
  const std::string address = request.size() > 3 ? frame_text(request[3]) : "?";
  if (!ok && refused_.fetch_add(1) < kLoggedRefusals) {
    spdlog::warn("{}: refused a connection from {}: {}", owner_, address,
                 plain_ ? "its user name and password are not this run's"
                        : "its CURVE key is not one this process admits");
  }
  const std::string user_id = ok ? std::to_string(rank) : "";
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

// Request frames: version, request id, domain, address, identity, mechanism, credentials...
// (CURVE: the client's 32-byte public key; PLAIN: user name, password).
int ZapHandler::admitted_rank(const std::vector<zmq::message_t>& request) const {
  if (request.size() < 7) return -1;
  if (!plain_) {
    if (frame_text(request[5]) != "CURVE" || request[6].size() != 32) return -1;
    Key key{};
    std::memcpy(key.data(), request[6].data(), key.size());
    const auto it = admitted_.find(key);
    return it == admitted_.end() ? -1 : it->second;
  }
  if (request.size() < 8 || frame_text(request[5]) != "PLAIN") return -1;
  int rank = -1;
  const std::string user = frame_text(request[6]);
  const auto [ptr, ec] = std::from_chars(user.data(), user.data() + user.size(), rank);
  if (ec != std::errc() || ptr != user.data() + user.size()) return -1;
  const auto it = plain_->admitted.find(rank);
  if (it == plain_->admitted.end()) return -1;
  return equal_in_constant_time(frame_text(request[7]), it->second) ? rank : -1;
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
