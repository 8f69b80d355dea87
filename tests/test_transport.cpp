// The transports: frames arrive as sent, payloads are released exactly once, receive() returns
// "nothing yet" on time-out or wake(), and ZeroMQ binds OS-chosen ports on 127.0.0.1.
#include <doctest/doctest.h>

#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <thread>

#include "sgp/error.hpp"
#include "sgp/transport/curve.hpp"
#include "sgp/transport/handed_listener.hpp"
#include "sgp/transport/inproc_transport.hpp"
#include "sgp/transport/zmq_transport.hpp"
#include "support/byte_patterns.hpp"
#include "support/temp_dir.hpp"

using namespace sgp;
using namespace sgp::transport;
using namespace std::chrono_literals;
using sgp::testing::bytes_of;
using sgp::testing::same;

namespace {

const ReceiveLimits kLimits{8 << 20, 64};

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
  ZmqTransport a(0, "tcp://127.0.0.1:*", kLimits), b(1, "tcp://127.0.0.1:*", kLimits);
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
  ZmqTransport a(0, "tcp://127.0.0.1:*", kLimits);
  {
    ZmqTransport probe(9, "tcp://127.0.0.1:*", kLimits);
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

TEST_CASE("ZeroMQ transport: peers of one host exchange over ipc://, not TCP loopback") {
  // A port where nothing listens on TCP once the probe is gone; the receiver listens only at
  // the ipc endpoint that a transport bound at tcp://127.0.0.1:PORT would add.
  std::string tcp;
  {
    ZmqTransport probe(9, "tcp://127.0.0.1:*", kLimits, {.local_ipc = false});
    tcp = probe.endpoint();
  }
  const std::string ipc = local_ipc_endpoint(tcp);
  CHECK(ipc == "ipc://@sgp-127.0.0.1-" + tcp.substr(tcp.rfind(':') + 1));
  ZmqTransport receiver(1, ipc, kLimits);
  SUBCASE("local_ipc (the default): a connect to the tcp endpoint reaches the ipc listener") {
    ZmqTransport sender(0, "tcp://127.0.0.1:*", kLimits);
    sender.connect(1, tcp);
    check_round_trip(sender, receiver, 3 << 20);
  }
  SUBCASE("local_ipc off: the message goes to the TCP port, where nobody listens") {
    ZmqTransport sender(0, "tcp://127.0.0.1:*", kLimits, {.local_ipc = false});
    sender.connect(1, tcp);
    sender.send(1, bytes_of(64, 1), bytes_of(1024, 2), [] {});
    CHECK_FALSE(receiver.receive(300ms).has_value());
    sender.discard_pending(1);
  }
  CHECK(local_ipc_endpoint("tcp://127.0.0.1:*").empty());
  CHECK(local_ipc_endpoint("ipc:///tmp/x").empty());
}

TEST_CASE(
    "ZeroMQ transport: a transport bound at tcp://HOST:PORT also listens at its ipc endpoint") {
  ZmqTransport receiver(1, "tcp://127.0.0.1:*", kLimits);
  // A sender that is told the ipc endpoint itself (local_ipc changes only tcp endpoints).
  ZmqTransport sender(0, "tcp://127.0.0.1:*", kLimits, {.local_ipc = false});
  sender.connect(1, local_ipc_endpoint(receiver.endpoint()));
  check_round_trip(sender, receiver, 1 << 16);
}

TEST_CASE("ZeroMQ transport: a handed listening socket is taken over, once, for its own port") {
  const Listener held = listen_on_free_port("127.0.0.1", "test");
  REQUIRE(held.port > 0);
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(held.port);
  CHECK_FALSE(take_handed_listener(endpoint).has_value());  // no $SGP_LISTEN_FD
  REQUIRE(::setenv(kHandedListenerVariable, std::to_string(held.fd).c_str(), 1) == 0);
  // A variable naming a socket at another port (inherited from elsewhere) is not taken.
  CHECK_FALSE(take_handed_listener("tcp://127.0.0.1:" + std::to_string(held.port + 1)));
  const auto taken = take_handed_listener(endpoint);
  REQUIRE(taken == held.fd);
  CHECK_FALSE(take_handed_listener(endpoint).has_value());  // once per process
  ::unsetenv(kHandedListenerVariable);
  // The port is held: binding it is refused; taking the socket over works.
  CHECK_THROWS_WITH_AS(ZmqTransport(1, endpoint, kLimits, {.local_ipc = false}),
                       doctest::Contains("Address already in use (another process holds that "
                                         "port: give the topology other ports, or port 0"),
                       IoError);
  ZmqTransport receiver(1, endpoint, kLimits, {.local_ipc = false, .listen_fd = *taken});
  CHECK(receiver.endpoint() == endpoint);
  ZmqTransport sender(0, "tcp://127.0.0.1:*", kLimits, {.local_ipc = false});
  sender.connect(1, endpoint);
  check_round_trip(sender, receiver, 1 << 10);
}

TEST_CASE("ZeroMQ transport: a bad endpoint is an IoError naming it") {
  CHECK_THROWS_WITH_AS(ZmqTransport(0, "tcp://not-an-address:x", kLimits),
                       doctest::Contains("tcp://not-an-address:x"), IoError);
}

TEST_CASE("ZeroMQ transport with CURVE: admitted keys get through tagged with their rank") {
  const auto ka = generate_curve_keypair(), kb = generate_curve_keypair(),
             stranger = generate_curve_keypair();
  ZmqOptions oa, ob;
  oa.curve = ZmqCurve{ka, {{kb.public_key, 1}}, {{1, kb.public_key}}};
  ob.curve = ZmqCurve{kb, {{ka.public_key, 0}}, {{0, ka.public_key}}};
  ZmqTransport a(0, "tcp://127.0.0.1:*", kLimits, oa), b(1, "tcp://127.0.0.1:*", kLimits, ob);
  a.connect(1, b.endpoint());
  b.connect(0, a.endpoint());
  const auto payload = bytes_of(kLimits.max_frame_bytes, 2);  // the largest frame allowed
  a.send(1, bytes_of(64, 1), payload, [] {});
  auto m = b.receive(5000ms);
  REQUIRE(m.has_value());
  CHECK(m->authenticated_rank() == 0);
  CHECK(same(m->frame(1), payload));

  // A client with a key b does not admit never gets a message in.
  ZmqOptions os;
  os.curve = ZmqCurve{stranger, {}, {{1, kb.public_key}}};
  ZmqTransport s(2, "tcp://127.0.0.1:*", kLimits, os);
  s.connect(1, b.endpoint());
  const auto junk = bytes_of(100, 4);
  s.send(1, bytes_of(64, 3), junk, [] {});
  CHECK_FALSE(b.receive(500ms).has_value());
}

TEST_CASE("ZeroMQ transport with PLAIN run passwords: the right pair's gets in, tagged; no other") {
  ZmqOptions oa, ob;
  oa.plain = ZmqPlain{{}, {{1, "a-to-b"}}};
  ob.plain = ZmqPlain{{{{0, "a-to-b"}, {2, "c-to-b"}}}, {}};
  ZmqTransport a(0, "tcp://127.0.0.1:*", kLimits, oa), b(1, "tcp://127.0.0.1:*", kLimits, ob);
  a.connect(1, b.endpoint());
  const auto payload = bytes_of(1000, 2);
  a.send(1, bytes_of(64, 1), payload, [] {});
  auto m = b.receive(5000ms);
  REQUIRE(m.has_value());
  CHECK(m->authenticated_rank() == 0);
  CHECK(same(m->frame(1), payload));

  // Rank 2 presenting rank 0's password under its own name, one posing as rank 0 with a wrong
  // password, and one without credentials (NULL mechanism): none gets a message in.
  ZmqOptions swapped, wrong;
  swapped.plain = ZmqPlain{{}, {{1, "a-to-b"}}};
  wrong.plain = ZmqPlain{{}, {{1, "a-to-c"}}};
  ZmqTransport s(2, "tcp://127.0.0.1:*", kLimits, swapped),
      w(0, "tcp://127.0.0.1:*", kLimits, wrong), open(0, "tcp://127.0.0.1:*", kLimits);
  for (ZmqTransport* t : {&s, &w, &open}) {
    t->connect(1, b.endpoint());
    t->send(1, bytes_of(64, 3), bytes_of(100, 4), [] {});
  }
  CHECK_FALSE(b.receive(500ms).has_value());
}

TEST_CASE("CURVE key files: written once (secret 0600), read back, refused when damaged") {
  sgp::testing::TempDir dir;
  const auto keys = generate_curve_keypair();
  write_curve_keypair(dir.path(), "peer-0", keys);
  const auto back = read_curve_keypair(dir.path(), "peer-0");
  CHECK(back.public_key == keys.public_key);
  CHECK(back.secret_key == keys.secret_key);
  const auto perms = std::filesystem::status(dir / "peer-0.key").permissions();
  CHECK((perms & std::filesystem::perms::all) ==
        (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write));
  CHECK_THROWS_WITH_AS(write_curve_keypair(dir.path(), "peer-0", generate_curve_keypair()),
                       doctest::Contains("never overwritten"), InputError);
  CHECK(read_curve_keypair(dir.path(), "peer-0").secret_key == keys.secret_key);
  std::ofstream(dir / "bad.key") << "not a key\n";
  CHECK_THROWS_WITH_AS(read_curve_keypair(dir.path(), "bad"),
                       doctest::Contains("not a CURVE secret key"), InputError);
  CHECK_THROWS_WITH_AS(read_curve_keypair(dir.path(), "missing"), doctest::Contains("missing.key"),
                       InputError);
}
