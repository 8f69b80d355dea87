#pragma once
// A peer's side of the consensus monitor's channel: at evaluation points it hands its de-biased
// parameters z to the monitor (best effort: never blocks, drops when the monitor is slow or
// gone). Snapshots use the gossip wire format (wire_format.hpp) with sender = rank,
// round = iteration, weight = the peer's push-sum weight w (the monitor sums them: mass
// accounting), coefficient = 1, so the monitor validates every field the same way.
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sgp/gossip/wire_format.hpp"
#include "sgp/transport/curve.hpp"
#include "sgp/transport/plain.hpp"

namespace sgp::transport {
class SnapshotSender;
}

namespace sgp::gossip {

// The header of rank's snapshot of iteration (its payload: the bytes of z).
std::array<std::byte, kHeaderBytes> snapshot_header(int rank, std::int64_t iteration,
                                                    std::span<const float> z, double weight = 1.0);

class SnapshotPublisher {
 public:
  // `curve`: authenticate to a keyed monitor (gossip::snapshot_curve); `plain`: to a monitor of
  // a keyless run on one host (gossip::snapshot_plain).
  SnapshotPublisher(const std::string& endpoint, int rank,
                    const std::optional<transport::CurveClient>& curve = std::nullopt,
                    const std::optional<transport::PlainClient>& plain = std::nullopt);
  ~SnapshotPublisher();
  // Returns whether the snapshot was queued. Never blocks, except that a `last` snapshot waits
  // up to 2 s for a monitor not connected yet (transport::SnapshotSender::try_send).
  bool publish(std::int64_t iteration, std::span<const float> z, double weight = 1.0,
               bool last = false);
  std::uint64_t dropped() const;

 private:
  std::unique_ptr<transport::SnapshotSender> sender_;
  int rank_;
};

}  // namespace sgp::gossip
