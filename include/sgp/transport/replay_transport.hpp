#pragma once
// A Transport that hands out messages put back by its owner before those of the transport it
// wraps: for a start-up exchange (peers agreeing where to resume) that reads the inner
// transport directly and must leave the gossip messages of faster peers for the engine.
#include <deque>

#include "sgp/transport/transport.hpp"

namespace sgp::transport {

class ReplayTransport final : public Transport {
 public:
  explicit ReplayTransport(Transport& inner) : inner_(inner) {}

  Transport& inner() { return inner_; }
  // Queued for receive(), in order; call from the thread that receives.
  void put_back(Message message) { replay_.push_back(std::move(message)); }

  int rank() const override { return inner_.rank(); }
  void send(int dest, std::span<const std::byte> header, std::span<const std::byte> payload,
            ReleaseFn on_release) override {
    inner_.send(dest, header, payload, std::move(on_release));
  }
  std::optional<Message> receive(std::chrono::milliseconds timeout) override {
    if (replay_.empty()) return inner_.receive(timeout);
    Message next = std::move(replay_.front());
    replay_.pop_front();
    return next;
  }
  void wake() override { inner_.wake(); }
  void discard_pending(int dest) override { inner_.discard_pending(dest); }
  void release_peer(int peer) override { inner_.release_peer(peer); }

 private:
  Transport& inner_;
  std::deque<Message> replay_;
};

}  // namespace sgp::transport
