#include "sgp/gossip/snapshot_publisher.hpp"

#include <span>

#include "sgp/transport/snapshot_channel.hpp"

namespace sgp::gossip {

std::array<std::byte, kHeaderBytes> snapshot_header(int rank, std::int64_t iteration,
                                                    std::span<const float> z, double weight) {
  WireHeader h;
  h.sender = rank;
  h.round = iteration;
  h.weight = weight;
  h.coefficient = 1.0;
  h.total = h.count = z.size();  // one chunk: the whole vector
  h.payload_hash = payload_hash(std::as_bytes(z));
  return encode_header(h);
}

SnapshotPublisher::SnapshotPublisher(const std::string& endpoint, int rank,
                                     const std::optional<transport::CurveClient>& curve,
                                     const std::optional<transport::PlainClient>& plain)
    : sender_(std::make_unique<transport::SnapshotSender>(endpoint, curve, plain)), rank_(rank) {}

SnapshotPublisher::~SnapshotPublisher() = default;

bool SnapshotPublisher::publish(std::int64_t iteration, std::span<const float> z, double weight,
                                bool last) {
  return sender_->try_send(snapshot_header(rank_, iteration, z, weight), std::as_bytes(z), last);
}

std::uint64_t SnapshotPublisher::dropped() const { return sender_->dropped(); }

}  // namespace sgp::gossip
