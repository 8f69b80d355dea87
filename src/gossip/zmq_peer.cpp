#include "sgp/gossip/zmq_peer.hpp"

#include <algorithm>

#include "sgp/error.hpp"
#include "sgp/gossip/wire_format.hpp"

namespace sgp::gossip {

std::unique_ptr<transport::ZmqTransport> open_zmq_transport(const topology::Schedule& schedule,
                                                            int rank, transport::ZmqOptions options,
                                                            std::size_t vector_size) {
  if (!schedule.has_endpoints()) {
    throw InputError(
        "the topology gives no endpoints: every node needs an endpoint attribute "
        "(e.g. endpoint=\"tcp://127.0.0.1:5600\") to run peers over ZeroMQ");
  }
  SGP_ENFORCE(rank >= 0 && rank < schedule.num_peers(), "rank {} outside the {}-peer topology",
              rank, schedule.num_peers());
  if (vector_size > 0) {
    options.max_frame_bytes =
        static_cast<std::int64_t>(std::max(kHeaderBytes, vector_size * sizeof(float)));
  }
  auto t = std::make_unique<transport::ZmqTransport>(rank, schedule.endpoint(rank), options);
  for (int dest : schedule.all_out_neighbors(rank)) t->connect(dest, schedule.endpoint(dest));
  return t;
}

}  // namespace sgp::gossip
