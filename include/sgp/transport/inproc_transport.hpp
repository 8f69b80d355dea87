#pragma once
// A Transport over an InProcNetwork: for N peers as threads of one process (unit tests). Same
// contract as the ZeroMQ transport. Like ZeroMQ, which releases a payload once the bytes are in
// the kernel (not once the receiving application has read them), this transport releases the
// sender's payload as soon as it has copied it into the receiver's mailbox: a release never
// depends on the receiver's progress. Sends never block (mailboxes are unbounded).
#include "sgp/transport/inproc_network.hpp"
#include "sgp/transport/transport.hpp"

namespace sgp::transport {

class InProcTransport final : public Transport {
 public:
  InProcTransport(InProcNetwork& network, int rank);

  int rank() const override { return rank_; }
  void send(int dest, std::span<const std::byte> header, std::span<const std::byte> payload,
            ReleaseFn on_release) override;
  std::optional<Message> receive(std::chrono::milliseconds timeout) override;
  void wake() override;
  void discard_pending(int dest) override;

 private:
  InProcNetwork& network_;
  int rank_;
  std::vector<bool> discarded_;  // per destination
};

}  // namespace sgp::transport
