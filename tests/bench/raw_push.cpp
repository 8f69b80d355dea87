// Raw ZeroMQ baseline for scripts/bench-network (figures only, no assertions): one process per
// rank of a topology, on its endpoint (e.g. inside an emulated host of `sgp emulate up`), pushing
// the bytes a gossip round pushes along the same edges, with nothing else: each round r, send
// BYTES (cut into chunks of CHUNK bytes, as the engine cuts x, each chunk one zero-copy message)
// to every out-neighbour of phase r, then receive everything the in-neighbours of phase r push.
// No header, hashing or mixing: the time ZeroMQ alone takes to move a round over these links.
//
// Usage: raw_push TOPOLOGY RANK BYTES ROUNDS [CHUNK=1048576]
// Prints "raw_push rank R: median round X ms, p90 Y ms over K rounds (first 3 skipped)".
#include <zmq.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "sgp/topology/dot_file.hpp"
#include "sgp/topology/schedule.hpp"

using Clock = std::chrono::steady_clock;

namespace {

void check(int rc, const char* what) {
  if (rc < 0) {
    std::fprintf(stderr, "raw_push: %s: %s\n", what, zmq_strerror(zmq_errno()));
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: raw_push TOPOLOGY RANK BYTES ROUNDS [CHUNK]\n");
    return 2;
  }
  sgp::topology::DotReadOptions options;
  options.require_endpoints = true;
  const auto schedule = sgp::topology::read_dot_file(argv[1], options);
  const int rank = std::atoi(argv[2]);
  const std::size_t bytes = std::strtoull(argv[3], nullptr, 10);
  const int rounds = std::atoi(argv[4]);
  const std::size_t chunk = argc > 5 ? std::strtoull(argv[5], nullptr, 10) : 1 << 20;
  constexpr int kSkipped = 3;
  if (rank < 0 || rank >= schedule.num_peers() || bytes == 0 || chunk == 0 || rounds <= kSkipped) {
    std::fprintf(stderr, "raw_push: bad rank, bytes, chunk or rounds (> %d)\n", kSkipped);
    return 2;
  }
  void* ctx = zmq_ctx_new();
  void* pull = zmq_socket(ctx, ZMQ_PULL);
  check(zmq_bind(pull, schedule.endpoint(rank).c_str()), "bind");
  std::vector<void*> push(schedule.num_peers(), nullptr);
  for (int dest : schedule.all_out_neighbors(rank)) {
    push[dest] = zmq_socket(ctx, ZMQ_PUSH);
    const int hwm = 1000;
    zmq_setsockopt(push[dest], ZMQ_SNDHWM, &hwm, sizeof hwm);
    check(zmq_connect(push[dest], schedule.endpoint(dest).c_str()), "connect");
  }
  std::vector<char> buffer(bytes, 7);
  const std::size_t chunks = (bytes + chunk - 1) / chunk;
  std::vector<double> ms;
  for (int r = 0; r < rounds; ++r) {
    const auto start = Clock::now();
    for (const auto& edge : schedule.out_edges(rank, r)) {
      for (std::size_t off = 0; off < bytes; off += chunk) {
        zmq_msg_t out;
        zmq_msg_init_data(&out, buffer.data() + off, std::min(chunk, bytes - off), nullptr,
                          nullptr);
        check(zmq_msg_send(&out, push[edge.peer], 0), "send");
      }
    }
    const std::size_t expected = chunks * schedule.in_neighbors(rank, r).size();
    for (std::size_t i = 0; i < expected; ++i) {
      zmq_msg_t in;
      zmq_msg_init(&in);
      check(zmq_msg_recv(&in, pull, 0), "recv");
      zmq_msg_close(&in);
    }
    if (r >= kSkipped)
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf(
      "raw_push rank %d: median round %.3f ms, p90 %.3f ms over %zu rounds (first %d "
      "skipped)\n",
      rank, ms[ms.size() / 2], ms[ms.size() * 9 / 10], ms.size(), kSkipped);
  for (void* s : push)
    if (s) zmq_close(s);  // LINGER (default: forever) delivers the last round
  zmq_close(pull);
  zmq_ctx_term(ctx);
  return 0;
}
