// What a hostile client can make `sgp peer` allocate: frames above the largest push-sum chunk are
// refused by ZeroMQ (ZMQ_MAXMSGSIZE) before it allocates them, so a flood of them, 400 MB frames
// included, leaves the peer's peak memory where it was. Rank 1 of the 2-peer topology never
// starts: rank 0 sits in its first gossip round while a raw ZeroMQ client floods its port.
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "sgp/topology/dot_file.hpp"
#include "support/local_topology.hpp"
#include "support/peak_rss.hpp"
#include "support/skip.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"

namespace {

using namespace std::chrono_literals;

constexpr std::size_t kModelBytes = 669706 * sizeof(float);  // W1: MLP 784-512-512-10

// The peak RSS of `pid` once it has stopped growing for 2 s (it is then blocked waiting for its
// neighbour), or -1 if it exited.
std::int64_t settled_peak(pid_t pid) {
  std::int64_t last = -1;
  int stable = 0;
  for (int i = 0; i < 600 && stable < 10; ++i) {
    std::this_thread::sleep_for(200ms);
    const auto now = sgp::testing::peak_rss_bytes(pid);
    if (now < 0) return -1;
    stable = now == last ? stable + 1 : 0;
    last = now;
  }
  return last;
}

// Sends `count` frames of `bytes` each to `endpoint` from a fresh PUSH socket (zero copy: the
// frame is one zero-filled buffer, never touched). The receiver drops the connection at each
// oversized frame; ZeroMQ reconnects for the next.
void flood(const std::string& endpoint, std::size_t bytes, int count) {
  std::vector<char> buffer(bytes);
  void* context = zmq_ctx_new();
  void* push = zmq_socket(context, ZMQ_PUSH);
  const int linger = 0, timeout = 5000;
  zmq_setsockopt(push, ZMQ_LINGER, &linger, sizeof linger);
  zmq_setsockopt(push, ZMQ_SNDTIMEO, &timeout, sizeof timeout);
  REQUIRE(zmq_connect(push, endpoint.c_str()) == 0);
  for (int i = 0; i < count; ++i) {
    zmq_msg_t message;
    zmq_msg_init_data(&message, buffer.data(), bytes, nullptr, nullptr);
    if (zmq_msg_send(&message, push, 0) < 0) zmq_msg_close(&message);
    std::this_thread::sleep_for(150ms);  // the reconnect interval is 100 ms
  }
  zmq_close(push);
  zmq_ctx_term(context);
}

}  // namespace

TEST_CASE("sgp peer: 400 MB frames and a flood of oversized ones cost it no memory") {
  SGP_SKIP_WITHOUT_FASHION_MNIST();
  sgp::testing::TempDir dir;
  const auto topology = sgp::testing::write_local_topology(dir / "t.dot", "ring", 2);
  const auto endpoint =
      sgp::topology::read_dot_file(topology, {.require_endpoints = true, .self_weight = {}})
          .endpoint(0);
  const pid_t peer =
      sgp::testing::start_sgp("peer --rank 0 --device cpu --timeout-ms 120000 --topology " +
                                  topology.string() + " --run-dir " + (dir / "run").string(),
                              dir / "peer.log");
  const auto before = settled_peak(peer);
  REQUIRE(before > 0);
  flood(endpoint, 400u << 20, 3);
  flood(endpoint, kModelBytes + 4096, 40);
  const auto after = settled_peak(peer);
  ::kill(peer, SIGTERM);
  ::waitpid(peer, nullptr, 0);
  std::ifstream log(dir / "peer.log");
  INFO(std::string(std::istreambuf_iterator<char>(log), {}));
  REQUIRE(after > 0);
  const double growth = static_cast<double>(after - before);
  MESSAGE("peak RSS of sgp peer: " << before / 1e6 << " MB before, " << after / 1e6
                                   << " MB after 3 x 400 MB + 40 x 2.7 MB frames: growth "
                                   << growth / 1e6 << " MB = " << growth / kModelBytes
                                   << " x the model's " << kModelBytes / 1e6 << " MB");
  CHECK(growth < 2.0 * kModelBytes);
}

TEST_CASE("sgp monitor: loopback by default, other addresses need keys or --insecure") {
  sgp::testing::TempDir dir;
  const auto topology = sgp::testing::write_local_topology(dir / "t.dot", "ring", 2);
  const auto help = sgp::testing::run_sgp("monitor --help");
  CHECK(help.output.find("tcp://127.0.0.1:29400") != std::string::npos);
  const auto open = sgp::testing::run_sgp("monitor --topology " + topology.string() +
                                          " --bind 'tcp://*:0' --run-dir " + (dir / "m").string());
  INFO(open.output);
  CHECK(open.exit_code == 2);
  CHECK(open.output.find("endpoint tcp://*:0 is not a loopback address") != std::string::npos);
}

TEST_CASE("sgp monitor: Ctrl-C stops it cleanly (exit 0, summary written, no error)") {
  SGP_SKIP_WITHOUT_FASHION_MNIST();  // it loads the test set for the average model
  sgp::testing::TempDir dir;
  const auto topology = sgp::testing::write_local_topology(dir / "t.dot", "ring", 2);
  const pid_t monitor =
      sgp::testing::start_sgp("monitor --topology " + topology.string() +
                                  " --bind 'tcp://127.0.0.1:*' --run-dir " + (dir / "m").string(),
                              dir / "monitor.log");
  // Wait until it listens, then interrupt it as Ctrl-C would.
  for (int i = 0; i < 300; ++i) {
    std::ifstream log(dir / "monitor.log");
    const std::string text(std::istreambuf_iterator<char>(log), {});
    if (text.find("monitor listening on") != std::string::npos) break;
    std::this_thread::sleep_for(100ms);
  }
  ::kill(monitor, SIGINT);
  int status = 0;
  ::waitpid(monitor, &status, 0);
  std::ifstream log(dir / "monitor.log");
  const std::string text(std::istreambuf_iterator<char>(log), {});
  INFO(text);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(text.find("error") == std::string::npos);
  CHECK(text.find("Interrupted") == std::string::npos);
  CHECK(std::filesystem::exists(dir / "m" / "monitor-summary.json"));
}
