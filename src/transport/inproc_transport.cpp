#include "sgp/transport/inproc_transport.hpp"

#include <vector>

#include "sgp/error.hpp"

namespace sgp::transport {
namespace {

// The copied frames of one message.
struct InProcFrames {
  std::vector<std::byte> header;
  std::vector<std::byte> payload;
};

}  // namespace

InProcTransport::InProcTransport(InProcNetwork& network, int rank)
    : network_(network), rank_(rank), discarded_(static_cast<std::size_t>(network.num_ranks())) {
  SGP_ENFORCE(rank >= 0 && rank < network.num_ranks(), "rank {} outside the network of {}", rank,
              network.num_ranks());
}

void InProcTransport::send(int dest, std::span<const std::byte> header,
                           std::span<const std::byte> payload, ReleaseFn on_release) {
  SGP_ENFORCE(dest >= 0 && dest < network_.num_ranks(), "send to rank {} outside the network of {}",
              dest, network_.num_ranks());
  auto owner = std::make_shared<InProcFrames>();
  owner->header.assign(header.begin(), header.end());
  owner->payload.assign(payload.begin(), payload.end());
  if (on_release) on_release();
  if (discarded_[static_cast<std::size_t>(dest)]) {
    throw IoError(fmt::format("rank {}: the link to rank {} was given up", rank_, dest));
  }
  std::vector<std::span<const std::byte>> frames{std::span<const std::byte>(owner->header),
                                                 std::span<const std::byte>(owner->payload)};
  const auto sender = network_.authenticated() ? std::optional<int>(rank_) : std::nullopt;
  network_.deliver(rank_, dest, Message(std::move(frames), std::move(owner), sender));
}

std::optional<Message> InProcTransport::receive(std::chrono::milliseconds timeout) {
  return network_.take(rank_, timeout);
}

void InProcTransport::wake() { network_.wake(rank_); }

void InProcTransport::discard_pending(int dest) {
  SGP_ENFORCE(dest >= 0 && dest < network_.num_ranks(), "rank {} outside the network", dest);
  discarded_[static_cast<std::size_t>(dest)] = true;
  network_.discard(rank_, dest);
}

}  // namespace sgp::transport
