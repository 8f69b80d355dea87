// Benchmark (figures only, no assertions): what one round of asgp's engine (AsyncPushSum) costs a
// peer on the CPU, next to the floor measured in the same run:
//   memcpy       single-threaded copy of n floats (the machine's copy bandwidth);
//   passes       each pass the engine makes over the vector, alone: a payload's checksum (XXH3,
//                once per message sent and once per message received), an out-edge's push with
//                its float32 delta, and an in-edge applying a delta or a float64 base;
//   engine       8 peers (the topology's), each an AsyncPushSum over in-process transports, all
//                on this one thread, round after round: the median of one peer's mix() (receive
//                and apply what arrived, push onto the out-edges, send), its split into receive,
//                passes and send (AsyncPushSum::profile), and the bytes of state a peer holds.
// One thread, so that nothing else on the host is measured (the 8 peers take turns), and the CPU
// time of that thread (a shared host's other work does not count; page faults do). Between two
// rounds of a peer, its caller changes every element of z a little (an SGD step, not timed).
//
// Usage: bench_asgp [topology=exponential] [rounds=48] [floats=669706]
//   topology: exponential (3 out-edges and 3 in-edges per round at 8 peers) or
//   one-peer-exponential (1 of each per round, 3 of each over its period); 669706 floats is W1.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_median.hpp"
#include "sgp/compute/cpu_backend.hpp"
#include "sgp/error.hpp"
#include "sgp/gossip/async_push_sum.hpp"
#include "sgp/gossip/running_sums.hpp"
#include "sgp/gossip/wire_format.hpp"
#include "sgp/topology/generator.hpp"
#include "sgp/transport/inproc_network.hpp"
#include "sgp/transport/inproc_transport.hpp"

using namespace sgp;

namespace {

constexpr int kPeers = 8;
constexpr int kReps = 9;

using sgp::bench::median;

// CPU seconds of this thread: what a pass costs, whatever else the (shared) host runs.
double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// The median CPU seconds of `reps` calls of f.
template <typename F>
double time_median(int reps, F&& f) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const double start = cpu_seconds();
    f(r);
    t.push_back(cpu_seconds() - start);
  }
  return median(t);
}

std::vector<float> model_like(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> x(n);
  for (auto& v : x) v = normal(rng);
  return x;
}

void print_pass(const char* name, double seconds, double copy_seconds) {
  std::printf("  %-34s %8.3f ms  %5.1f x memcpy\n", name, seconds * 1e3, seconds / copy_seconds);
}

// Each pass alone, on the engine's own code (running_sums.hpp, wire_format.hpp); the wire is
// left out (each buffer is released at once, and the in-edge applies the newest one again).
void bench_passes(std::size_t n, double copy_seconds) {
  auto xf = model_like(n, 1);
  std::vector<float> xr(n, 0.0f);
  double xw = 1.0;
  const gossip::HeldMass pushed{xf, xr, xw};
  const auto hash_bytes = std::as_bytes(std::span<const float>(xf));
  std::uint64_t sink = 0;
  print_pass("checksum of n floats (XXH3)",
             time_median(kReps, [&](int) { sink += gossip::payload_hash(hash_bytes); }),
             copy_seconds);
  gossip::OutEdge out(n, 0);
  gossip::InEdge in(n, 1, 0);
  std::vector<float> z(n, 0.0f), residual(n, 0.0f);
  double weight = 0.0, w = 0.0;
  const gossip::HeldMass held{z, residual, w};
  std::shared_ptr<gossip::SendBuffer> last;
  auto push = [&](std::int64_t round) {
    last = out.push_z_and_snapshot(0.5, pushed, false, round, 1, weight);
    last->chunks_on_wire.store(0);
    return gossip::InEdge::Chunk{last->dtype, 0, round, 0, last->payload(0, n), weight};
  };
  for (int r = 0; r < 2; ++r) in.apply_to_z(true, push(r), held);  // every page touched
  // Rounds 2 .. 6 push, 7 .. 15 apply the delta of round 6 again: all in window 0.
  print_pass("out-edge push + float32 delta", time_median(5, [&](int r) { push(2 + r); }),
             copy_seconds);
  const auto delta = push(6);
  print_pass("in-edge applies a float32 delta",
             time_median(kReps,
                         [&](int r) {
                           auto c = delta;
                           c.sequence = 7 + r;
                           in.apply_to_z(true, c, held);
                         }),
             copy_seconds);
  print_pass("out-edge push + float64 base",
             time_median(kReps, [&](int r) { push(gossip::kDeltaWindowRounds * (1 + r)); }),
             copy_seconds);
  const auto base = push(gossip::kDeltaWindowRounds * (1 + kReps));
  print_pass("in-edge applies a float64 base",
             time_median(kReps,
                         [&](int r) {
                           auto c = base;
                           c.sequence = base.sequence + r;
                           in.apply_to_z(true, c, held);
                         }),
             copy_seconds);
  if (sink == 42) std::printf(" ");  // keep the checksums observable
}

struct EnginePeers {
  EnginePeers(const topology::Schedule& s, std::size_t n) : network(kPeers) {
    for (int r = 0; r < kPeers; ++r) {
      backends.push_back(std::make_unique<compute::CpuBackend>(1));
      transports.push_back(std::make_unique<transport::InProcTransport>(network, r));
      xs.push_back(model_like(n, 100 + static_cast<unsigned>(r)));
      gossip::PushSumConfig c;
      c.mode = gossip::Mode::async;
      engines.push_back(std::make_unique<gossip::AsyncPushSum>(
          *backends.back(), s, *transports.back(), xs.back().data(), n, c));
    }
  }
  transport::InProcNetwork network;
  std::vector<std::unique_ptr<compute::CpuBackend>> backends;
  std::vector<std::unique_ptr<transport::InProcTransport>> transports;
  std::vector<std::vector<float>> xs;
  std::vector<std::unique_ptr<gossip::AsyncPushSum>> engines;
};

void bench_engine(const topology::Schedule& s, std::size_t n, int rounds, double copy_seconds) {
  EnginePeers peers(s, n);
  {  // The first round waits for the in-neighbours' first totals: every peer on its own thread.
    std::vector<std::thread> threads;
    for (auto& e : peers.engines) threads.emplace_back([&e] { e->mix(); });
    for (auto& t : threads) t.join();
  }
  const auto first = peers.engines[0]->profile();
  std::vector<double> t;
  for (int k = 1; k < rounds; ++k) {
    for (int r = 0; r < kPeers; ++r) {
      auto& x = peers.xs[static_cast<std::size_t>(r)];
      for (auto& v : x) v += 1e-4f;  // the caller's step
      const double start = cpu_seconds();
      peers.engines[static_cast<std::size_t>(r)]->mix();
      t.push_back(cpu_seconds() - start);
    }
  }
  const auto& p = peers.engines[0]->profile();
  const double per = 1e3 / (rounds - 1);
  std::printf("  one round (median of %zu)            %8.3f ms  %5.1f x memcpy\n", t.size(),
              median(t) * 1e3, median(t) / copy_seconds);
  std::printf("  rank 0 per round: receive %.3f ms, passes %.3f ms, send %.3f ms\n",
              (p.receive_s - first.receive_s) * per, (p.passes_s - first.passes_s) * per,
              (p.send_s - first.send_s) * per);
  std::size_t most = 0;
  for (const auto& e : peers.engines) most = std::max(most, e->state_bytes());
  std::printf("  engine state per peer: %.1f MB (%.1f bytes per element; the model: %.1f MB)\n",
              static_cast<double>(most) / 1e6, static_cast<double>(most) / static_cast<double>(n),
              static_cast<double>(n * sizeof(float)) / 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  constexpr const char* kUsage = "usage: bench_asgp [topology] [rounds>=2] [floats>=1]\n";
  const std::string kind = argc > 1 ? argv[1] : "exponential";
  if (kind == "-h" || kind == "--help") {
    std::printf("%s", kUsage);
    return 0;
  }
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 48;
  const std::size_t n = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 669706;
  if (rounds < 2 || n == 0) {
    std::fprintf(stderr, "%s", kUsage);
    return 2;
  }
  topology::GeneratorOptions options;
  options.num_peers = kPeers;
  std::optional<topology::Schedule> schedule;
  try {
    schedule.emplace(topology::generate_topology(topology::parse_topology_kind(kind), options));
  } catch (const InputError& e) {
    std::fprintf(stderr, "bench_asgp: %s\n%s", e.what(), kUsage);
    return 2;
  }
  std::vector<float> a(n, 1.0f), b(n, 2.0f);
  const double copy_seconds = time_median(kReps, [&](int r) {
    std::memcpy(b.data(), a.data(), n * sizeof(float));
    a[static_cast<std::size_t>(r) % n] = b[(static_cast<std::size_t>(r) * 7) % n];
  });
  std::printf("asgp round, %d peers on %s, n = %zu floats (%.2f MB), one thread\n", kPeers,
              kind.c_str(), n, static_cast<double>(n * sizeof(float)) / 1e6);
  print_pass("memcpy of n floats (the floor)", copy_seconds, copy_seconds);
  bench_passes(n, copy_seconds);
  bench_engine(*schedule, n, rounds, copy_seconds);
  return 0;
}
