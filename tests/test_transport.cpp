// The transports: frames arrive as sent, payloads are released exactly once, receive() returns
// "nothing yet" on time-out or wake(), and ZeroMQ binds OS-chosen ports on 127.0.0.1.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <numeric>
#include <thread>

#include "sgp/error.hpp"
#include "sgp/transport/inproc_transport.hpp"
#include "sgp/transport/zmq_transport.hpp"

using namespace sgp;
using namespace sgp::transport;
using namespace std::chrono_literals;

namespace {

std::vector<std::byte> bytes_of(std::size_t n, int seed) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = std::byte(static_cast<unsigned>((i * 131 + seed) & 0xff));
  return v;
}

bool same(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

// Sends [header, payload] from `from` to `to`'s rank and checks what arrives and the release.
void check_round_trip(Transport& from, Transport& to, std::size_t payload_bytes) {
  const auto header = bytes_of(64, 1);
  const auto payload = bytes_of(payload_bytes, 2);
  std::atomic<int> released{0};
  from.send(to.rank(), header, payload, [&] { ++released; });
  auto m = to.receive(5000ms);
  REQUIRE(m.has_value());
  REQUIRE(m->num_frames() == 2);
  CHECK(same(m->frame(0), header));
  CHECK(same(m->frame(1), payload));
  for (int i = 0; i < 500 && released.load() == 0; ++i) std::this_thread::sleep_for(1ms);
  CHECK(released.load() == 1);
}

}  // namespace

TEST_CASE("in-process transport: frames, release, timeout, wake") {
  InProcNetwork net(2);
  InProcTransport a(net, 0), b(net, 1);
  check_round_trip(a, b, 1000);
  check_round_trip(b, a, 0);
  CHECK_FALSE(b.receive(10ms).has_value());
  b.wake();
  CHECK_FALSE(b.receive(10s).has_value());  // returns at once
  a.discard_pending(1);
  CHECK_THROWS_AS(a.send(1, bytes_of(4, 0), {}, [] {}), IoError);
}

TEST_CASE("ZeroMQ transport binds an OS-chosen port and moves frames without copying") {
  ZmqTransport a(0, "tcp://127.0.0.1:*"), b(1, "tcp://127.0.0.1:*");
  CHECK(a.endpoint().rfind("tcp://127.0.0.1:", 0) == 0);
  CHECK(a.endpoint() != b.endpoint());
  a.connect(1, b.endpoint());
  b.connect(0, a.endpoint());
  check_round_trip(a, b, 10);       // small: ZeroMQ may keep it inline
  check_round_trip(a, b, 3 << 20);  // large: zero copy on both sides
  check_round_trip(b, a, 0);        // empty payload
  CHECK_FALSE(b.receive(20ms).has_value());

  std::thread waker([&] {
    std::this_thread::sleep_for(50ms);
    b.wake();
  });
  const auto start = std::chrono::steady_clock::now();
  CHECK_FALSE(b.receive(20s).has_value());
  CHECK(std::chrono::steady_clock::now() - start < 10s);  // woken, not timed out
  waker.join();
}

TEST_CASE("ZeroMQ transport: messages to a peer that is not up are held, then discarded") {
  ZmqTransport a(0, "tcp://127.0.0.1:*");
  {
    ZmqTransport probe(9, "tcp://127.0.0.1:*");
    // Connect to an endpoint nobody listens on any more once `probe` is gone.
    a.connect(1, probe.endpoint());
  }
  const auto payload = bytes_of(1 << 16, 3);
  std::atomic<int> released{0};
  a.send(1, bytes_of(64, 0), payload, [&] { ++released; });
  std::this_thread::sleep_for(50ms);
  CHECK(released.load() == 0);  // still queued: the payload must stay untouched
  a.discard_pending(1);
  for (int i = 0; i < 2000 && released.load() == 0; ++i) std::this_thread::sleep_for(1ms);
  CHECK(released.load() == 1);
  CHECK_THROWS_AS(a.send(1, bytes_of(64, 0), payload, [] {}), IoError);
}

TEST_CASE("ZeroMQ transport: a bad endpoint is an IoError naming it") {
  CHECK_THROWS_WITH_AS(ZmqTransport(0, "tcp://not-an-address:x"),
                       doctest::Contains("tcp://not-an-address:x"), IoError);
}
