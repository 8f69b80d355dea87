// What a hostile client or an unlucky host can do to a run, and what the run does about it:
// - memory: frames above the largest push-sum chunk are refused by ZeroMQ (ZMQ_MAXMSGSIZE) before
//   it allocates them, so a flood of them, 400 MB frames included, leaves the peer's peak memory
//   where it was;
// - descriptors: a flood of idle connections under a low descriptor limit does not cost the run
//   its results (connections that do not greet are closed within seconds, writes wait for them);
// - disk: on a full disk the failing rank, file and errno are named, no temporary file stays, and
//   --resume finishes once there is room.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
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
#include "support/json_files.hpp"
#include "support/local_topology.hpp"
#include "support/peak_rss.hpp"
#include "support/skip.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"
#include "support/text.hpp"

namespace {

using namespace std::chrono_literals;

constexpr std::size_t kModelBytes = 669706 * sizeof(float);  // W1: MLP 784-512-512-10

// The endpoint of `rank` in a topology file.
std::string endpoint_of(const std::filesystem::path& topology, int rank) {
  return sgp::topology::read_dot_file(topology, {.require_endpoints = true, .self_weight = {}})
      .endpoint(rank);
}

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
  const auto endpoint = endpoint_of(topology, 0);
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

namespace {

// `count` TCP connections to 127.0.0.1:`port` that never send a byte, closed on destruction.
// One after another, each given up to 50 ms to be accepted: the server takes every one it can, so
// its descriptors are gone; the rest wait in its listen queue or for a SYN retry.
class IdleConnections {
 public:
  IdleConnections(int port, int count) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < count; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (fd < 0) break;  // the test's own limit: fewer connections, checked below
      ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address);
      pollfd connected{fd, POLLOUT, 0};
      ::poll(&connected, 1, 50);
      fds_.push_back(fd);
    }
    REQUIRE(static_cast<int>(fds_.size()) == count);
  }
  ~IdleConnections() {
    for (int fd : fds_) ::close(fd);
  }

 private:
  std::vector<int> fds_;
};

// Whether `file` holds `text` within `seconds`.
bool wait_for_text(const std::filesystem::path& file, const std::string& text, int seconds) {
  for (int i = 0; i < seconds * 20; ++i) {
    std::ifstream in(file);
    if (std::string(std::istreambuf_iterator<char>(in), {}).find(text) != std::string::npos)
      return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

int port_of(const std::string& endpoint) {
  return std::stoi(endpoint.substr(endpoint.rfind(':') + 1));
}

// A tiny 2-peer run: a small model, a few iterations.
std::string tiny_launch(const std::filesystem::path& topology, const std::filesystem::path& run,
                        int iterations = 40) {
  return "launch --device cpu --model mlp:32 --topology " + topology.string() + " --run-dir " +
         run.string() + " --max-iterations " + std::to_string(iterations) +
         " --eval-every 0.5 --log-every 10 --timeout-ms 30000";
}

}  // namespace

// Once both peers train (their connections are up), idle connections take every descriptor rank
// 1 may have; it must finish its training and write its results all the same.
TEST_CASE("sgp launch: 400 idle connections to one peer at 256 descriptors cost it nothing") {
  SGP_SKIP_WITHOUT_FASHION_MNIST();
  sgp::testing::TempDir dir;
  const auto topology = sgp::testing::write_local_topology(dir / "t.dot", "ring", 2);
  const auto endpoint = endpoint_of(topology, 1);
  const auto quiet = sgp::testing::run_sgp(tiny_launch(topology, dir / "quiet", 2000));
  REQUIRE(quiet.exit_code == 0);
  // `ulimit -n` lowers the hard limit too: sgp cannot raise it back.
  const auto run = dir / "flooded";
  const pid_t launch =
      sgp::testing::start_command("ulimit -n 256 && exec " + sgp::testing::sgp_binary().string() +
                                      " " + tiny_launch(topology, run, 2000),
                                  dir / "launch.log");
  REQUIRE(wait_for_text(run / "peer-1.jsonl", "\"loss\"", 60));
  int status = 0;
  {
    const IdleConnections flood(port_of(endpoint), 400);
    ::waitpid(launch, &status, 0);
  }
  INFO(sgp::testing::slurp(dir / "launch.log"));
  INFO(sgp::testing::slurp(run / "peer-1.log"));
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  const auto flooded = sgp::testing::read_json(run / "summary.json");
  const auto expected = sgp::testing::read_json(dir / "quiet" / "summary.json");
  CHECK(flooded["iterations"] == expected["iterations"]);
  CHECK(flooded["mean_peer_accuracy"].get<double>() ==
        doctest::Approx(expected["mean_peer_accuracy"].get<double>()).epsilon(0.002));
  CHECK(std::filesystem::exists(run / "peer-1-model.bin"));
  if (sgp::testing::contains(sgp::testing::slurp(run / "peer-1.log"), "out of file descriptors"))
    MESSAGE("rank 1 waited for descriptors to write its results");
}

namespace {

// A tmpfs of `bytes` mounted at `at` (root only), unmounted on destruction.
class SmallFilesystem {
 public:
  SmallFilesystem(const std::filesystem::path& at, std::size_t bytes) : at_(at) {
    std::filesystem::create_directories(at);
    const auto r = sgp::testing::run_command("mount -t tmpfs -o size=" + std::to_string(bytes) +
                                             " tmpfs " + at.string());
    mounted_ = r.exit_code == 0;
    why_ = r.output;
  }
  ~SmallFilesystem() {
    if (mounted_) sgp::testing::run_command("umount -l " + at_.string());
  }
  bool mounted() const { return mounted_; }
  const std::string& why() const { return why_; }
  std::uint64_t free_bytes() const {
    struct statvfs s {};
    ::statvfs(at_.c_str(), &s);
    return static_cast<std::uint64_t>(s.f_bavail) * s.f_frsize;
  }

 private:
  std::filesystem::path at_;
  bool mounted_ = false;
  std::string why_;
};

std::vector<std::string> temporary_files_in(const std::filesystem::path& dir) {
  std::vector<std::string> found;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.path().filename().string().ends_with(".tmp")) found.push_back(e.path().string());
  }
  return found;
}

}  // namespace

TEST_CASE("sgp launch on a full disk: rank, file and errno named, no temporary file, resumable") {
  SGP_SKIP_WITHOUT_FASHION_MNIST();
  if (::geteuid() != 0) SGP_SKIP("mounting a small tmpfs needs root");
  sgp::testing::TempDir dir;
  const SmallFilesystem disk(dir / "disk", 4u << 20);
  if (!disk.mounted()) SGP_SKIP("cannot mount a tmpfs here: " + disk.why());
  const auto topology = sgp::testing::write_local_topology(dir / "t.dot", "ring", 2);
  const auto run = dir / "disk" / "run";
  // A checkpoint of mlp:32 is 2 x 25,450 floats (about 200 KB): room for the first two of the
  // run's four (one per rank at iterations 10 and 20) and the small files, not for the rest.
  const std::uint64_t room = 550u << 10;
  {
    std::ofstream filler(dir / "disk" / "filler", std::ios::binary);
    filler << std::string(disk.free_bytes() - room, 'x');
  }
  const std::string flags = tiny_launch(topology, run) + " --checkpoint-every 10";
  const auto full = sgp::testing::run_sgp(flags);
  INFO(full.output);
  CHECK(full.exit_code == 3);
  CHECK(sgp::testing::contains(full.output, "No space left on device (ENOSPC)"));
  CHECK(sgp::testing::contains(full.output, run.string()));  // the file, in the run directory
  CHECK(full.output.find("I/O error: rank ") != std::string::npos);  // the launcher's: whose
  CHECK(full.output.find("sgp: I/O error: rank ", full.output.find("I/O error: rank ") + 1) !=
        std::string::npos);  // and the peer's own, relayed from memory: its log is on that disk
  CHECK(temporary_files_in(run).empty());
  std::filesystem::remove(dir / "disk" / "filler");
  const auto resumed = sgp::testing::run_sgp(flags + " --resume");
  INFO(resumed.output);
  CHECK(resumed.exit_code == 0);
  CHECK(sgp::testing::read_json(run / "summary.json")["iterations"] == 40);
  CHECK(temporary_files_in(run).empty());
}
