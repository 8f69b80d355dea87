#include "sgp/gossip/zmq_peer.hpp"

#include <algorithm>

#include "sgp/error.hpp"
#include "sgp/gossip/wire_format.hpp"

namespace sgp::gossip {

std::unique_ptr<transport::ZmqTransport> open_zmq_transport(const topology::Schedule& schedule,
                                                            int rank, transport::ZmqOptions options,
                                                            std::size_t vector_size, Mode mode) {
  if (!schedule.has_endpoints()) {
    throw InputError(
        "the topology gives no endpoints: every node needs an endpoint attribute "
        "(e.g. endpoint=\"tcp://127.0.0.1:5600\") to run peers over ZeroMQ");
  }
  SGP_ENFORCE(rank >= 0 && rank < schedule.num_peers(), "rank {} outside the {}-peer topology",
              rank, schedule.num_peers());
  if (vector_size > 0) {
    // Async: float64 totals, and a mass transfer (weight, x, membership table) in one frame.
    const std::size_t largest = mode == Mode::async
                                    ? (vector_size + 1) * sizeof(double) + 8 * schedule.num_peers()
                                    : vector_size * sizeof(float);
    options.max_frame_bytes = static_cast<std::int64_t>(std::max(kHeaderBytes, largest));
  }
  auto t = std::make_unique<transport::ZmqTransport>(rank, schedule.endpoint(rank), options);
  if (mode == Mode::async) {
    for (int dest = 0; dest < schedule.num_peers(); ++dest)
      if (dest != rank) t->connect(dest, schedule.endpoint(dest));
  } else {
    for (int dest : schedule.all_out_neighbors(rank)) t->connect(dest, schedule.endpoint(dest));
  }
  return t;
}

}  // namespace sgp::gossip
