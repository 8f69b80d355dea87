// The local fast path: shared-memory rings (wrap-around, a full ring, releases in any order),
// descriptors that are refused before a byte is read, and ShmTransport over real ZeroMQ
// transports on 127.0.0.1 (payloads through the ring, small ones and a full ring over ZeroMQ,
// a local and a remote destination, a forged descriptor counted and dropped, rings gone from
// /dev/shm).
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "sgp/transport/shm_ring.hpp"
#include "sgp/transport/shm_transport.hpp"
#include "sgp/transport/zmq_transport.hpp"
#include "support/byte_patterns.hpp"

using namespace sgp::transport;
using namespace std::chrono_literals;
using sgp::testing::bytes_of;
using sgp::testing::same;

namespace {

bool in_dev_shm(const std::string& name) { return std::filesystem::exists("/dev/shm" + name); }

// The rings this process created that are still in /dev/shm.
int own_rings() {
  const std::string prefix = "sgp-shm-" + std::to_string(::getpid()) + "-";
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm"))
    if (e.path().filename().string().starts_with(prefix)) ++n;
  return n;
}

// accept() expecting a refusal: the reason, and that nothing was handed out.
ShmRefusal refusal_of(ShmRingReader& reader, const ShmDescriptor& d) {
  ShmRefusal why = ShmRefusal::bad_descriptor;
  CHECK_FALSE(reader.accept(d, why).has_value());
  return why;
}

}  // namespace

TEST_CASE("shm ring: payloads in order, a full ring, releases in any order, wrap-around") {
  ShmRingWriter writer(0, 1, 4096);
  const auto a = bytes_of(1500, 1), b = bytes_of(1500, 2), c = bytes_of(1500, 3);
  const auto da = writer.write(a), db = writer.write(b);
  REQUIRE(da);
  REQUIRE(db);
  CHECK(da->position == 0);
  CHECK(db->position == 1536);   // 64-byte aligned
  CHECK_FALSE(writer.write(c));  // 1024 bytes left at the end, and nothing released

  const auto attached = ShmRingReader::attach(*da, 1);
  REQUIRE(attached.reader);
  ShmRingReader& reader = *attached.reader;
  CHECK(writer.attached());
  CHECK_FALSE(in_dev_shm(writer.name()));  // unlinked once mapped: nothing can be left behind
  ShmRefusal why{};
  const auto pa = reader.accept(*da, why), pb = reader.accept(*db, why);
  REQUIRE(pa);
  REQUIRE(pb);
  CHECK(same(*pa, a));
  CHECK(same(*pb, b));
  reader.release(db->position);  // out of order: a still holds the ring's start
  CHECK_FALSE(writer.write(c));
  reader.release(da->position);
  const auto dc = writer.write(c);  // skips the 1024 bytes at the end: back at offset 0
  REQUIRE(dc);
  CHECK(dc->position == 4096);
  const auto pc = reader.accept(*dc, why);
  REQUIRE(pc);
  CHECK(same(*pc, c));
  CHECK(refusal_of(reader, *da) == ShmRefusal::out_of_bounds);  // a replay: already read
  reader.release(dc->position);
  CHECK(writer.write(bytes_of(4096, 4)));  // the whole ring is free again
}

TEST_CASE("shm ring: hostile descriptors are refused with a reason, never read") {
  ShmRingWriter writer(2, 3, 8192);
  const auto d = writer.write(bytes_of(1000, 5));
  REQUIRE(d);
  auto refused = [](ShmDescriptor x, int own_rank = 3) {
    const auto attached = ShmRingReader::attach(x, own_rank);
    CHECK_FALSE(attached.reader);
    return attached.refusal;
  };
  ShmDescriptor forged = *d;
  forged.token[0] ^= std::byte{1};
  CHECK(refused(forged) == ShmRefusal::wrong_token);
  CHECK(refused(*d, 4) == ShmRefusal::wrong_receiver);
  for (const std::string name : {"/etc/passwd", "/sgp-shm-1-2-3-xyz", "/sgp-shm-1-2-3-../../x",
                                 "/sgp-shm-1-5-3-0123456789abcdef0123456789abcdef"}) {
    forged = *d;
    forged.name = name;
    CHECK(refused(forged) == ShmRefusal::bad_name);
  }
  forged = *d;
  forged.name = "/sgp-shm-1-2-3-0123456789abcdef0123456789abcdef";  // well formed, not there
  CHECK(refused(forged) == ShmRefusal::cannot_attach);
  // An object another process could have made readable to others: not a ring of ours.
  const int fd = ::shm_open(forged.name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0644);
  REQUIRE(fd >= 0);
  ::fchmod(fd, 0644);
  REQUIRE(::ftruncate(fd, 8192 + 4096) == 0);
  ::close(fd);
  CHECK(refused(forged) == ShmRefusal::bad_object);
  ::shm_unlink(forged.name.c_str());

  const auto attached = ShmRingReader::attach(*d, 3);
  REQUIRE(attached.reader);
  ShmRingReader& reader = *attached.reader;
  forged = *d;
  forged.token[15] ^= std::byte{1};
  CHECK(refusal_of(reader, forged) == ShmRefusal::wrong_token);
  const std::vector<std::pair<std::uint64_t, std::uint64_t>> spans = {
      {0, 0}, {0, 9000}, {8000, 1000}, {0, 2000}, {4096, 1000}, {~0ULL - 10, 100}};
  for (const auto& span : spans) {
    forged = *d;
    forged.position = span.first;
    forged.length = span.second;
    CAPTURE(forged.position);
    CAPTURE(forged.length);
    CHECK(refusal_of(reader, forged) == ShmRefusal::out_of_bounds);
  }
  ShmRefusal why{};
  CHECK(reader.accept(*d, why));  // the real one still goes through
  reader.release(d->position);
}

TEST_CASE("shm descriptors: encoding round trip, truncated or unterminated bytes refused") {
  ShmDescriptor d{1, 2, 128, 1000, {}, "/sgp-shm-7-1-2-0123456789abcdef0123456789abcdef"};
  d.token[3] = std::byte{9};
  auto bytes = encode_shm_descriptor(d);
  const auto back = decode_shm_descriptor(bytes);
  REQUIRE(back);
  CHECK(back->sender == 1);
  CHECK(back->receiver == 2);
  CHECK(back->position == 128);
  CHECK(back->length == 1000);
  CHECK(back->token == d.token);
  CHECK(back->name == d.name);
  CHECK_FALSE(decode_shm_descriptor(std::span(bytes).first(kShmDescriptorBytes - 1)));
  std::fill(bytes.begin() + 48, bytes.end(), std::byte{'a'});
  CHECK_FALSE(decode_shm_descriptor(bytes));
}

namespace {

const ReceiveLimits kLimits{8 << 20, 64};

// Two ZeroMQ peers on 127.0.0.1, rank 0 pushing to rank 1, each behind the fast path.
struct LocalPair {
  ZmqTransport zmq0{0, "tcp://127.0.0.1:*", kLimits};
  ZmqTransport zmq1{1, "tcp://127.0.0.1:*", kLimits};
  std::optional<ShmTransport> shm0, shm1;
  explicit LocalPair(std::size_t ring_bytes) {
    zmq0.connect(1, zmq1.endpoint());
    shm0.emplace(zmq0, ShmOptions{ring_bytes, 1024});
    shm1.emplace(zmq1, ShmOptions{ring_bytes, 1024});
  }
};

}  // namespace

TEST_CASE("shm transport: ring for a local peer, ZeroMQ for small payloads and a full ring") {
  LocalPair pair(64 << 10);
  CHECK(pair.shm0->local_destinations() == std::set<int>{1});
  const auto header = bytes_of(80, 7);
  std::vector<std::vector<std::byte>> sent;
  for (int i = 0; i < 6; ++i) sent.push_back(bytes_of(i == 2 ? 100 : 20000, 10 + i));
  std::atomic<int> released{0};
  for (const auto& payload : sent) pair.shm0->send(1, header, payload, [&] { ++released; });
  const ShmStats stats = pair.shm0->stats();
  CHECK(stats.shm_messages == 3);     // 3 x 20000 fill the 64 KiB ring
  CHECK(stats.inline_messages == 2);  // the others wait for room over ZeroMQ
  CHECK(stats.shm_bytes == 60000);
  CHECK(released.load() >= 3);  // copied into the ring: released at once
  std::vector<Message> held;    // held, as an engine holds a round: the ring stays full
  for (const auto& payload : sent) {
    auto m = pair.shm1->receive(5000ms);
    REQUIRE(m);
    REQUIRE(m->num_frames() == 2);
    CHECK(same(m->frame(0), header));
    CHECK(same(m->frame(1), payload));  // in order, whichever way each went
    held.push_back(std::move(*m));
  }
  held.clear();  // releases the ring
  pair.shm0->send(1, header, sent[0], nullptr);
  CHECK(pair.shm0->stats().shm_messages == 4);
  CHECK(pair.shm1->receive(5000ms));
  CHECK(pair.shm1->stats().refused_total() == 0);
}

TEST_CASE("shm transport: a forged descriptor over ZeroMQ is counted and dropped") {
  LocalPair pair(64 << 10);
  pair.shm0->send(1, bytes_of(80, 1), bytes_of(20000, 2), nullptr);
  REQUIRE(pair.shm1->receive(5000ms));
  // A plain ZeroMQ peer claiming to be rank 0 (no CURVE here, so the claim is all there is),
  // with a descriptor of a ring that does not exist.
  ZmqTransport intruder(0, "tcp://127.0.0.1:*", kLimits);
  intruder.connect(1, pair.zmq1.endpoint());
  const auto name = "/sgp-shm-" + std::to_string(::getpid()) + "-0-1-" + std::string(32, 'a');
  const auto frame = encode_shm_descriptor({0, 1, 20032, 100, {}, name});
  intruder.send(1, frame, {}, nullptr);
  CHECK_FALSE(pair.shm1->receive(500ms));
  CHECK(pair.shm1->stats().refused[static_cast<int>(ShmRefusal::cannot_attach)] == 1);
  pair.shm0->send(1, bytes_of(80, 1), bytes_of(20000, 3), nullptr);
  CHECK(pair.shm1->receive(5000ms));  // the real ring still works
}

TEST_CASE("shm transport: rings leave nothing in /dev/shm, stale ones are removed") {
  {
    LocalPair pair(64 << 10);
    pair.shm0->send(1, bytes_of(80, 1), bytes_of(20000, 2), nullptr);
    CHECK(own_rings() == 1);
    pair.shm0->discard_pending(1);  // the receiver never attached: the sender unlinks
    CHECK(own_rings() == 0);
    LocalPair other(64 << 10);
    other.shm0->send(1, bytes_of(80, 1), bytes_of(20000, 2), nullptr);
    CHECK(other.shm1->receive(5000ms));  // attached: the receiver unlinked the name
    CHECK(own_rings() == 0);
  }
  // A ring whose creator died before anyone attached it.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  const std::string name = "/sgp-shm-" + std::to_string(child) + "-0-1-" + std::string(32, 'b');
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  REQUIRE(fd >= 0);
  ::close(fd);
  CHECK(remove_stale_rings() >= 1);
  CHECK_FALSE(in_dev_shm(name));
}

TEST_CASE("shm transport: a peer that left has its rings unmapped; a later send makes a new one") {
  // The mappings of this process's rings from rank 0 to rank 1 (writer's and reader's).
  const auto mapped = [] {
    std::ifstream maps("/proc/self/maps");
    const std::string ring = "sgp-shm-" + std::to_string(::getpid()) + "-0-1-";
    int n = 0;
    for (std::string line; std::getline(maps, line);) n += line.find(ring) != std::string::npos;
    return n;
  };
  LocalPair pair(64 << 10);
  const auto header = bytes_of(80, 1);
  pair.shm0->send(1, header, bytes_of(20000, 2), nullptr);
  auto held = pair.shm1->receive(5000ms);
  REQUIRE(held);
  CHECK(mapped() == 2);
  pair.shm0->release_peer(1);
  pair.shm1->release_peer(0);
  CHECK(mapped() == 1);  // the payload still held keeps the reader's mapping
  CHECK(same(held->frame(1), bytes_of(20000, 2)));
  held.reset();
  CHECK(mapped() == 0);
  pair.shm0->send(1, header, bytes_of(20000, 3), nullptr);  // a new ring, attached anew
  const auto again = pair.shm1->receive(5000ms);
  REQUIRE(again);
  CHECK(same(again->frame(1), bytes_of(20000, 3)));
  CHECK(pair.shm0->stats().shm_messages == 2);
  CHECK(pair.shm1->stats().refused_total() == 0);
}

TEST_CASE("shm transport: mixed destinations, the ring to a local one and TCP to another") {
  ZmqTransport zmq0{0, "tcp://127.0.0.1:*", kLimits}, zmq1{1, "tcp://127.0.0.1:*", kLimits},
      zmq2{2, "tcp://127.0.0.1:*", kLimits};
  zmq0.connect(1, zmq1.endpoint());
  // By name rather than a numeric loopback address: not this host by the rule, so TCP.
  const std::string port = zmq2.endpoint().substr(zmq2.endpoint().rfind(':'));
  zmq0.connect(2, "tcp://localhost" + port);
  ShmTransport shm0(zmq0, {64 << 10, 1024}), shm1(zmq1, {64 << 10, 1024}),
      shm2(zmq2, {64 << 10, 1024});
  CHECK(shm0.local_destinations() == std::set<int>{1});
  const auto header = bytes_of(80, 1), payload = bytes_of(30000, 2);
  shm0.send(1, header, payload, nullptr);
  shm0.send(2, header, payload, nullptr);
  for (ShmTransport* to : {&shm1, &shm2}) {
    const auto m = to->receive(5000ms);
    REQUIRE(m);
    CHECK(same(m->frame(0), header));
    CHECK(same(m->frame(1), payload));
  }
  CHECK(shm0.stats().shm_messages == 1);
  CHECK(shm0.stats().shm_bytes == 30000);
}

// Authentication (PLAIN run passwords; CURVE admits the same way, test_transport.cpp): a
// process that did not authenticate never gets a descriptor to the receiver, even one naming a
// real ring with its token, so it cannot make the receiver attach that ring; an authenticated
// peer cannot pass off another rank's ring as its own.
TEST_CASE("shm transport: only the authenticated sender of a ring makes the receiver attach it") {
  ZmqOptions receiver, owner, other, impostor;
  receiver.plain = ZmqPlain{{{{0, "a-to-b"}, {2, "c-to-b"}}}, {}};
  owner.plain = ZmqPlain{{}, {{1, "a-to-b"}}};
  other.plain = ZmqPlain{{}, {{1, "c-to-b"}}};
  impostor.plain = ZmqPlain{{}, {{1, "guessed"}}};
  ZmqTransport zmq1(1, "tcp://127.0.0.1:*", kLimits, receiver);
  ShmTransport shm1(zmq1, {64 << 10, 1024});
  // Rank 0's ring with a payload in it; every sender below presents its real descriptor.
  ShmRingWriter ring(0, 1, 64 << 10);
  const auto payload = bytes_of(20000, 7);
  const auto descriptor = ring.write(payload);
  REQUIRE(descriptor);
  const auto encoded = encode_shm_descriptor(*descriptor);
  const auto header = bytes_of(80, 1);
  std::vector<std::byte> frame(encoded.size() + header.size());
  std::ranges::copy(header, std::ranges::copy(encoded, frame.begin()).out);
  const auto present = [&](int as_rank, const ZmqOptions& options) {
    ZmqTransport sender(as_rank, "tcp://127.0.0.1:*", kLimits, options);
    sender.connect(1, zmq1.endpoint());
    sender.send(1, frame, {}, nullptr);
    return shm1.receive(500ms);
  };
  // Without credentials, and as rank 0 with a wrong password: refused before a frame is read.
  CHECK_FALSE(present(0, ZmqOptions{}));
  CHECK_FALSE(present(0, impostor));
  CHECK(shm1.stats().refused_total() == 0);  // never got as far as the ring's checks
  CHECK_FALSE(ring.attached());
  // Rank 2, authenticated, claiming rank 0's ring.
  CHECK_FALSE(present(2, other));
  CHECK(shm1.stats().refused[static_cast<int>(ShmRefusal::wrong_sender)] == 1);
  CHECK_FALSE(ring.attached());
  // Rank 0 itself: attached, the payload read in place.
  const auto m = present(0, owner);
  REQUIRE(m);
  CHECK(m->authenticated_rank() == 0);
  CHECK(same(m->frame(1), payload));
  CHECK(ring.attached());
}
