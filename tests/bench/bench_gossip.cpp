// Benchmark (figures only, no assertions): one push-sum round between peers on loopback, next to
// the two limits measured in the same run:
//   memcpy    single-threaded memcpy of the message size (the machine's copy bandwidth);
//   raw zmq   libzmq PUSH->PULL over tcp://127.0.0.1, the same bytes and the same pattern (every
//             peer sends to its out-neighbour and waits for what it receives), zero-copy send, no
//             header, no hashing, no mixing: what ZeroMQ alone achieves; once as one message,
//             once cut into the same chunks the engine uses;
//   push-sum  PushSumEngine::mix() over ZmqTransport (chunked; header, XXH3 on both sides,
//             scale and axpy), plain TCP and with CURVE (keys in the topology: every byte
//             encrypted and authenticated by libsodium on both sides), and with --compress fp16
//             (half the bytes, plus the conversions);
//   cipher    CURVE's cipher alone (libsodium crypto_box encrypt + open of the message on one
//             core): the CPU every CURVE byte costs whatever the transport does;
//   allreduce RingAllReduce over the same links: one exact average of the vector (each peer
//             sends 2 (N - 1) / N of it, in 2 (N - 1) pipelined steps), ms per op side by side
//             with one push-sum round (what sgp does per iteration instead).
//   one push  one message of the whole vector from one peer to another through the transport
//             (send until the receiver holds the payload), over tcp://127.0.0.1, over ipc:// (the
//             local_ipc twin) and over the local fast path (ShmTransport: a copy into the
//             edge's shared-memory ring, the descriptor over ipc://): goal shm >= 50% of memcpy.
// Figures: median wall time of one round and "algorithm bandwidth" = message bytes / round time
// (the bytes each peer sends in a round, divided by the round's time). ratio = push-sum GB/s /
// raw zmq GB/s (goal >= 0.70), against both raw figures.
//
// Usage: bench_gossip [peers=2] [reps=7] [sizes in floats...]  (default: 669706 and 37500000,
// i.e. the 2.68 MB W1 model and a 150 MB vector)
#include <sodium.h>
#include <zmq.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench_median.hpp"
#include "sgp/compute/cpu_backend.hpp"
#include "sgp/gossip/mixer.hpp"
#include "sgp/gossip/push_sum_engine.hpp"
#include "sgp/gossip/zmq_peer.hpp"
#include "sgp/topology/schedule.hpp"
#include "sgp/transport/curve.hpp"
#include "sgp/transport/shm_transport.hpp"
#include "sgp/transport/zmq_transport.hpp"

using Clock = std::chrono::steady_clock;

namespace {

using sgp::bench::median;

double memcpy_seconds(std::size_t bytes, int reps) {
  std::vector<char> a(bytes, 1), b(bytes, 2);
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto start = Clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    t.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    a[r % bytes] = b[(r * 7) % bytes];  // keep the copy observable
  }
  return median(t);
}

// CURVE's cipher alone: libsodium's crypto_box (XSalsa20-Poly1305, precomputed key, as libzmq
// uses it per message) encrypting then opening `bytes`, single-threaded. Every CURVE byte costs
// this on each side, whatever the transport does: the floor of CURVE's extra CPU per round.
double cipher_seconds(std::size_t bytes, int reps) {
  std::vector<unsigned char> pk(crypto_box_PUBLICKEYBYTES), sk(crypto_box_SECRETKEYBYTES),
      key(crypto_box_BEFORENMBYTES), nonce(crypto_box_NONCEBYTES, 0);
  crypto_box_keypair(pk.data(), sk.data());
  if (crypto_box_beforenm(key.data(), pk.data(), sk.data()) != 0) std::exit(1);
  std::vector<unsigned char> plain(bytes, 7), boxed(bytes + crypto_box_MACBYTES), opened(bytes);
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto start = Clock::now();
    crypto_box_easy_afternm(boxed.data(), plain.data(), bytes, nonce.data(), key.data());
    if (crypto_box_open_easy_afternm(opened.data(), boxed.data(), boxed.size(), nonce.data(),
                                     key.data()) != 0)
      std::exit(1);
    t.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  return median(t);
}

void check_zmq(int rc, const char* what) {
  if (rc < 0) {
    std::fprintf(stderr, "bench_gossip: %s: %s\n", what, zmq_strerror(zmq_errno()));
    std::exit(1);
  }
}

// Every thread: one PULL bound on 127.0.0.1:*, one PUSH to the next rank (a directed ring); one
// context (one I/O thread) per peer, as in separate peer processes and in ZmqTransport.
// `chunk` > 0: the message goes as ceil(bytes / chunk) messages of `chunk` bytes (the last one
// shorter), all sent before any is received, as the engine does.
double raw_zmq_seconds(int peers, std::size_t bytes, int reps, std::size_t chunk = 0) {
  if (chunk == 0) chunk = bytes;
  std::vector<void*> ctx(peers);
  std::vector<void*> pull(peers), push(peers);
  std::vector<std::string> endpoints(peers);
  for (int r = 0; r < peers; ++r) {
    ctx[r] = zmq_ctx_new();
    pull[r] = zmq_socket(ctx[r], ZMQ_PULL);
    check_zmq(zmq_bind(pull[r], "tcp://127.0.0.1:*"), "bind");
    char ep[256];
    size_t len = sizeof ep;
    zmq_getsockopt(pull[r], ZMQ_LAST_ENDPOINT, ep, &len);
    endpoints[r] = ep;
  }
  for (int r = 0; r < peers; ++r) {
    push[r] = zmq_socket(ctx[r], ZMQ_PUSH);
    check_zmq(zmq_connect(push[r], endpoints[(r + 1) % peers].c_str()), "connect");
  }
  std::vector<std::vector<char>> buffers(peers, std::vector<char>(bytes, 3));
  std::vector<double> times;
  std::barrier sync(peers);
  std::vector<std::thread> threads;
  for (int r = 0; r < peers; ++r) {
    threads.emplace_back([&, r] {
      for (int k = 0; k < reps + 1; ++k) {
        sync.arrive_and_wait();
        const auto start = Clock::now();
        for (std::size_t off = 0; off < bytes; off += chunk) {
          zmq_msg_t out;
          zmq_msg_init_data(&out, buffers[r].data() + off, std::min(chunk, bytes - off), nullptr,
                            nullptr);
          check_zmq(zmq_msg_send(&out, push[r], 0), "send");
        }
        for (std::size_t off = 0; off < bytes; off += chunk) {
          zmq_msg_t in;
          zmq_msg_init(&in);
          check_zmq(zmq_msg_recv(&in, pull[r], 0), "recv");
          zmq_msg_close(&in);
        }
        sync.arrive_and_wait();
        if (r == 0 && k > 0)
          times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < peers; ++r) {
    zmq_close(push[r]);
    zmq_close(pull[r]);
    zmq_ctx_term(ctx[r]);
  }
  return median(times);
}

enum class PushPath { tcp, ipc, shm };

// One push of `bytes` from rank 0 to rank 1 in this process: send, then receive the whole
// message and drop it (which gives a ring's bytes back); the median over `reps` pushes.
double push_seconds(PushPath path, std::size_t bytes, int reps) {
  const sgp::transport::ReceiveLimits limits{static_cast<std::int64_t>(bytes) + 4096, 16};
  sgp::transport::ZmqOptions options;
  options.local_ipc = path != PushPath::tcp;
  sgp::transport::ZmqTransport zmq0(0, "tcp://127.0.0.1:*", limits, options);
  sgp::transport::ZmqTransport zmq1(1, "tcp://127.0.0.1:*", limits, options);
  zmq0.connect(1, zmq1.endpoint());
  std::optional<sgp::transport::ShmTransport> shm0, shm1;
  if (path == PushPath::shm) {
    shm0.emplace(zmq0, sgp::transport::ShmOptions{2 * bytes + 4096});
    shm1.emplace(zmq1);
  }
  sgp::transport::Transport& from = shm0 ? static_cast<sgp::transport::Transport&>(*shm0) : zmq0;
  sgp::transport::Transport& to = shm1 ? static_cast<sgp::transport::Transport&>(*shm1) : zmq1;
  const std::vector<std::byte> header(80, std::byte{1}), payload(bytes, std::byte{2});
  std::vector<double> times;
  for (int k = 0; k < reps + 1; ++k) {  // the first push connects (and maps the ring): not timed
    const auto start = Clock::now();
    from.send(1, header, payload, nullptr);
    const auto m = to.receive(std::chrono::milliseconds(30000));
    if (!m || m->frame(1).size() != bytes) {
      std::fprintf(stderr, "bench_gossip: a push did not arrive whole\n");
      std::exit(1);
    }
    if (k > 0) times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  return median(times);
}

// One Mixer::step (a push-sum round, or an allreduce for Mode::allreduce) per rep.
double mixer_seconds(int peers, std::size_t n, int reps, bool curve,
                     sgp::gossip::PushSumConfig cfg = {}) {
  std::vector<std::vector<sgp::topology::Push>> edges(peers);
  std::vector<double> self(peers, 1.0);
  if (peers > 1) {
    for (int r = 0; r < peers; ++r) {
      edges[r].push_back({(r + 1) % peers, 0.5});
      self[r] = 0.5;
    }
  }
  sgp::topology::Schedule schedule(peers, {edges}, {self});
  const auto limits = sgp::gossip::push_sum_receive_limits(
      sgp::gossip::Chunking(n, sgp::gossip::PushSumConfig{}.chunk_elements));
  std::vector<sgp::transport::CurveKeyPair> keys;
  for (int r = 0; r < peers; ++r) keys.push_back(sgp::transport::generate_curve_keypair());
  std::vector<std::unique_ptr<sgp::transport::ZmqTransport>> ts;
  for (int r = 0; r < peers; ++r) {
    sgp::transport::ZmqOptions options;
    if (curve) {  // ring: r receives from r - 1 and pushes to r + 1
      const int from = (r + peers - 1) % peers, to = (r + 1) % peers;
      options.curve = sgp::transport::ZmqCurve{
          keys[r], {{keys[from].public_key, from}}, {{to, keys[to].public_key}}};
    }
    ts.push_back(
        std::make_unique<sgp::transport::ZmqTransport>(r, "tcp://127.0.0.1:*", limits, options));
  }
  for (int r = 0; r < peers; ++r) {
    for (int d : schedule.all_out_neighbors(r)) ts[r]->connect(d, ts[d]->endpoint());
  }
  std::vector<double> times;
  std::barrier sync(peers);
  std::vector<std::thread> threads;
  for (int r = 0; r < peers; ++r) {
    threads.emplace_back([&, r] {
      sgp::compute::CpuBackend backend(1);
      std::vector<float> x(n, static_cast<float>(r + 1));
      cfg.timeout = std::chrono::milliseconds(120000);
      auto mixer = sgp::gossip::make_mixer(backend, schedule, *ts[r], x.data(), n, cfg);
      auto& engine = *mixer;
      for (int k = 0; k < reps + 1; ++k) {
        sync.arrive_and_wait();
        const auto start = Clock::now();
        engine.step(k);
        sync.arrive_and_wait();
        if (r == 0 && k > 0)
          times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
      }
      if (r == 0) {
        const auto m = engine.metrics();
        std::printf("    %s, rank 0 over %lld rounds: send %.1f ms, wait %.1f ms, apply %.1f ms\n",
                    std::string(sgp::name_of(cfg.mode)).c_str(), static_cast<long long>(m.rounds),
                    m.send_seconds * 1e3, m.wait_seconds * 1e3, m.apply_seconds * 1e3);
      }
    });
  }
  for (auto& t : threads) t.join();
  return median(times);
}

}  // namespace

int main(int argc, char** argv) {
  const int peers = argc > 1 ? std::atoi(argv[1]) : 2;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 7;
  std::vector<std::size_t> sizes;
  for (int i = 3; i < argc; ++i) sizes.push_back(std::strtoull(argv[i], nullptr, 10));
  if (sizes.empty()) sizes = {669706, 37500000};
  if (peers < 2 || reps < 1) {
    std::fprintf(stderr, "usage: bench_gossip [peers>=2] [reps>=1] [floats...]\n");
    return 2;
  }
  std::printf(
      "push-sum round, %d peers in one process (directed ring, self weight 1/2), tcp "
      "loopback, %d reps, median\n",
      peers, reps);
  for (std::size_t n : sizes) {
    const std::size_t bytes = n * sizeof(float);
    const double gb = static_cast<double>(bytes) / 1e9;
    std::printf("message %zu floats = %.2f MB\n", n, bytes / 1e6);
    const double t_copy = memcpy_seconds(bytes, reps);
    const sgp::gossip::Chunking chunking(n, sgp::gossip::PushSumConfig{}.chunk_elements);
    const std::size_t chunk_bytes = chunking.per_chunk * sizeof(float);
    const double t_raw = raw_zmq_seconds(peers, bytes, reps);
    const double t_raw_chunked = raw_zmq_seconds(peers, bytes, reps, chunk_bytes);
    const double t_ps = mixer_seconds(peers, n, reps, false);
    const double t_curve = mixer_seconds(peers, n, reps, true);
    const double t_cipher = cipher_seconds(bytes, reps);
    sgp::gossip::PushSumConfig fp16;
    fp16.compression = sgp::gossip::Compression::fp16;
    const double t_fp16 = mixer_seconds(peers, n, reps, false, fp16);
    sgp::gossip::PushSumConfig ring;
    ring.mode = sgp::gossip::Mode::allreduce;
    const double t_allreduce = mixer_seconds(peers, n, reps, false, ring);
    std::printf("  memcpy                  %9.3f ms  %7.2f GB/s\n", t_copy * 1e3, gb / t_copy);
    const double t_tcp = push_seconds(PushPath::tcp, bytes, reps);
    const double t_ipc = push_seconds(PushPath::ipc, bytes, reps);
    const double t_shm = push_seconds(PushPath::shm, bytes, reps);
    std::printf("  one push, tcp           %9.3f ms  %7.2f GB/s\n", t_tcp * 1e3, gb / t_tcp);
    std::printf("  one push, ipc           %9.3f ms  %7.2f GB/s\n", t_ipc * 1e3, gb / t_ipc);
    std::printf("  one push, shared memory %9.3f ms  %7.2f GB/s (%.0f%% of memcpy)\n", t_shm * 1e3,
                gb / t_shm, 100.0 * t_copy / t_shm);
    std::printf("  raw zmq, 1 message      %9.3f ms  %7.2f GB/s\n", t_raw * 1e3, gb / t_raw);
    std::printf("  raw zmq, %3u x %5.2f MB %9.3f ms  %7.2f GB/s\n", chunking.chunks(),
                chunk_bytes / 1e6, t_raw_chunked * 1e3, gb / t_raw_chunked);
    std::printf("  push-sum, %3u chunks    %9.3f ms  %7.2f GB/s\n", chunking.chunks(), t_ps * 1e3,
                gb / t_ps);
    std::printf("  push-sum CURVE, %3u ch. %9.3f ms  %7.2f GB/s\n", chunking.chunks(),
                t_curve * 1e3, gb / t_curve);
    std::printf("  CURVE's cipher alone    %9.3f ms  %7.2f GB/s (encrypt + open, one core)\n",
                t_cipher * 1e3, gb / t_cipher);
    std::printf("  push-sum fp16, %3u ch.  %9.3f ms  %7.2f GB/s (of float32 bytes)\n",
                chunking.chunks(), t_fp16 * 1e3, gb / t_fp16);
    std::printf("  ring allreduce          %9.3f ms  %7.2f GB/s (sends %.2f x the vector)\n",
                t_allreduce * 1e3, gb / t_allreduce, 2.0 * (peers - 1) / peers);
    std::printf("  allreduce / push-sum round time: %.2f; push-sum fp16 / float32: %.2f\n",
                t_allreduce / t_ps, t_fp16 / t_ps);
    std::printf(
        "  ratio push-sum / raw zmq: %.2f (raw as 1 message), %.2f (raw in the same chunks)\n",
        t_raw / t_ps, t_raw_chunked / t_ps);
    // Each peer encrypts what it sends and opens what it receives: peers x t_cipher of CPU per
    // round, spread over the cores at best.
    const double cores = std::max(1u, std::thread::hardware_concurrency());
    std::printf(
        "  CURVE round time / plain round time: %.2f (the cipher alone adds >= %.2f ms per round "
        "on %.0f cores)\n",
        t_curve / t_ps, peers * t_cipher / std::min<double>(peers, cores) * 1e3, cores);
  }
  return 0;
}
