#pragma once
// Runs N push-sum peers as threads of this process, one engine each (gossip::make_mixer's for the
// config), over transports the test made (in-process or ZeroMQ), and checks the consensus they
// reach.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <set>
#include <thread>

#include "gossip_test_support.hpp"
#include "sgp/compute/cpu_backend.hpp"
#include "sgp/compute/device_buffer.hpp"
#include "sgp/gossip/mixer.hpp"
#include "sgp/transport/inproc_transport.hpp"

namespace sgp::testing {

struct PeerResult {
  std::vector<float> x, z;
  std::vector<double> w_after_round;
  double final_weight = 0;
  gossip::PushSumMetrics metrics;
  std::string error;
};

// Called on a peer's thread after each of its rounds (round = rounds completed).
using Hook = std::function<void(int rank, std::int64_t round)>;

// Makes each peer's backend, on that peer's thread.
using BackendFactory = std::function<std::unique_ptr<compute::Backend>()>;

// transports[rank] == nullptr: that peer never starts. make_backend: the backend each peer runs
// on (default: a one-thread CpuBackend); x and z live in its memory, as in training.
inline std::vector<PeerResult> run_peers(const topology::Schedule& s,
                                         const std::vector<transport::Transport*>& transports,
                                         std::size_t dim, int rounds, gossip::PushSumConfig cfg,
                                         Hook hook = {}, BackendFactory make_backend = {}) {
  const int n = s.num_peers();
  std::vector<PeerResult> results(n);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank) {
    if (transports[rank] == nullptr) continue;
    threads.emplace_back([&, rank] {
      PeerResult& out = results[rank];
      // Declared outside the try block, in the order they depend on each other, so that the
      // metrics of an engine that failed can still be read.
      std::unique_ptr<compute::Backend> backend;
      compute::DeviceBuffer<float> x;
      std::unique_ptr<gossip::Mixer> engine_owner;
      try {
        backend = make_backend ? make_backend() : std::make_unique<compute::CpuBackend>(1);
        x = compute::DeviceBuffer<float>(*backend,
                                         std::span<const float>(initial_vector(rank, n, dim)));
        engine_owner = gossip::make_mixer(*backend, s, *transports[rank], x.data(), dim, cfg);
        auto& engine = *engine_owner;
        for (int k = 0; k < rounds; ++k) {
          engine.step(k);
          out.w_after_round.push_back(engine.weight());
          if (hook) hook(rank, engine.round());
        }
        engine.finish();
        compute::DeviceBuffer<float> z(*backend, dim);
        engine.debias(z.data());
        out.z = z.to_host();
        out.x = x.to_host();
        out.final_weight = engine.weight();
        out.metrics = engine.metrics();
      } catch (const std::exception& e) {
        out.error = e.what();
        if (engine_owner) out.metrics = engine_owner->metrics();
      }
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

// run_peers over in-process transports of `net`, one per rank not in `absent`.
inline std::vector<PeerResult> run_inproc(const topology::Schedule& s,
                                          transport::InProcNetwork& net, std::size_t dim,
                                          int rounds, gossip::PushSumConfig cfg,
                                          const std::set<int>& absent = {}, Hook hook = {},
                                          BackendFactory make_backend = {}) {
  std::vector<std::unique_ptr<transport::InProcTransport>> owned;
  std::vector<transport::Transport*> transports;
  for (int rank = 0; rank < s.num_peers(); ++rank) {
    owned.push_back(
        absent.contains(rank) ? nullptr : std::make_unique<transport::InProcTransport>(net, rank));
    transports.push_back(owned.back().get());
  }
  return run_peers(s, transports, dim, rounds, cfg, hook, std::move(make_backend));
}

inline double relative_error(const std::vector<float>& z, const std::vector<double>& mean) {
  double worst = 0, scale = 0;
  for (std::size_t d = 0; d < z.size(); ++d) {
    worst = std::max(worst, std::abs(z[d] - mean[d]));
    scale = std::max(scale, std::abs(mean[d]));
  }
  return worst / scale;
}

// Every peer within max(min_tolerance, 2 x the float32 floor) of the exact mean; total weight N.
inline void check_consensus(const std::vector<PeerResult>& results, const topology::Schedule& s,
                            std::size_t dim, int rounds, double min_tolerance = 1e-6) {
  const int n = s.num_peers();
  const auto mean = exact_mean(n, dim);
  const double tolerance = std::max(min_tolerance, 2 * float32_floor(s, dim, rounds));
  double total_w = 0;
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r);
    REQUIRE(results[r].error == "");
    CHECK(relative_error(results[r].z, mean) <= tolerance);
    total_w += results[r].final_weight;
  }
  CHECK(std::abs(total_w - n) <= 1e-12);
}

}  // namespace sgp::testing
