// The push-sum engine's device path on real GPUs: one CudaBackend per peer thread, x and z in
// device memory, pinned staging for sends and device scratch for uploads, in sync and overlap
// mode. The same exactly known mean as the CPU tests (test_gossip_consensus.cpp), reached to
// the same tolerance. Skipped, visibly, without a GPU.
#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "sgp/topology/generator.hpp"
#include "support/cuda_test_support.hpp"
#include "support/gossip_peer_runner.hpp"

using namespace sgp;

TEST_CASE("the device path on CudaBackend peers mixes to the exact mean, sync and overlap" *
          doctest::skip(cuda_test::no_gpu())) {
  // Chunks of an odd size: most land on misaligned offsets of x (the kernels' scalar paths).
  constexpr std::size_t kDim = 100003;
  for (auto mode : {gossip::Mode::sync, gossip::Mode::overlap}) {
    CAPTURE(sgp::name_of(mode));
    constexpr int kPeers = 3;
    topology::GeneratorOptions options;
    options.num_peers = kPeers;
    const auto s =
        topology::generate_topology(topology::TopologyKind::kOnePeerExponential, options);
    const int rounds = testing::reference_rounds(s, kDim, 1e-7, 1) * 11 / 10 + 5;
    transport::InProcNetwork net(kPeers);
    gossip::PushSumConfig cfg;
    cfg.mode = mode;
    cfg.chunk_elements = 30001;
    cfg.timeout = std::chrono::milliseconds(20000);
    auto results = testing::run_inproc(s, net, kDim, rounds, cfg, {}, {}, [] {
      return std::make_unique<compute::CudaBackend>(0, false);
    });
    testing::check_consensus(results, s, kDim, rounds, mode == gossip::Mode::overlap ? 4e-6 : 1e-6);
    for (const auto& r : results) CHECK(r.metrics.rejected_total() == 0);
  }
}
