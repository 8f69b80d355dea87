// SGP training of N peers as threads in one process over the in-process transport: the
// Trainer, the push-sum engine and the algorithms together, on synthetic data whose classes are
// separable (so the right answer, high accuracy, is known).
#include <cmath>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include <doctest/doctest.h>

#include "sgp/compute/cpu_backend.hpp"
#include "sgp/data/dataset.hpp"
#include "sgp/gossip/snapshot_publisher.hpp"
#include "sgp/monitor/consensus_monitor.hpp"
#include "sgp/peer/algorithm.hpp"
#include "sgp/peer/run_directory.hpp"
#include "sgp/peer/trainer.hpp"
#include "sgp/topology/generator.hpp"
#include "sgp/transport/inproc_network.hpp"
#include "sgp/transport/inproc_transport.hpp"
#include "temp_dir.hpp"

using namespace sgp;

namespace {

// 10 Gaussian clusters in 16 dimensions (4 x 4 "images"), well apart.
data::Dataset clusters(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.0f, 0.3f);
  std::mt19937 centre_rng(12345);  // the same centres for train and test
  std::uniform_real_distribution<float> centre(-1.0f, 1.0f);
  std::vector<std::vector<float>> centres(10, std::vector<float>(16));
  for (auto& c : centres)
    for (auto& v : c) v = centre(centre_rng);
  data::Dataset set;
  set.rows = set.cols = 4;
  set.num_classes = 10;
  for (int i = 0; i < n; ++i) {
    const int label = i % 10;
    set.labels.push_back(label);
    for (float v : centres[label]) set.images.push_back(v + noise(rng));
  }
  return set;
}

struct PeerResult {
  peer::PeerSummary summary;
  std::vector<float> z;
};

// Trains `n` peers on `kind` with `algo`; returns each peer's summary and final z.
std::vector<PeerResult> train_peers(const std::string& kind, int n, const std::string& algo_name) {
  const auto algo = sgp::parse_name<peer::Algorithm>(algo_name, "algo");
  const auto train = clusters(2000, 1);
  const auto test = clusters(500, 2);
  topology::GeneratorOptions options;
  options.num_peers = n;
  const auto file_schedule =
      topology::generate_topology(topology::parse_topology_kind(kind), options);
  const auto schedule = peer::mixing_schedule(algo, file_schedule, std::nullopt, kind);
  peer::TrainConfig config;
  config.hidden = {24};
  config.batch_size = 16;
  config.epochs = 2;
  config.lr = 0.05;
  config.lr_scaling = model::LrScaling::none;
  config.lr_decay = model::LrDecay::constant;
  config.algo = algo;
  config.log_every = 10;
  config.eval_every = 1;
  config.timeout_ms = 20000;

  sgp::testing::TempDir dir;
  transport::InProcNetwork network(n);
  std::vector<PeerResult> results(n);
  std::mutex mutex;
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(n);
  for (int rank = 0; rank < n; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        compute::CpuBackend backend;
        transport::InProcTransport transport(network, rank);
        peer::RunDirectory run(dir.path(), rank);
        peer::Communication comm;
        if (peer::info(algo).communicates) {
          comm.schedule = &schedule;
          comm.transport = &transport;
        }
        comm.snapshot = [&, rank](std::int64_t, bool final, const std::vector<float>& z) {
          if (final) {
            std::lock_guard lock(mutex);
            results[rank].z = z;
          }
        };
        peer::Trainer trainer(config, rank, n, backend, train, test, run, comm);
        results[rank].summary = trainer.run();
      } catch (...) {
        errors[rank] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  return results;
}

}  // namespace

TEST_CASE("SGP peers in threads conserve push-sum mass and agree on a model that classifies") {
  // The star's weights are not doubly stochastic, so the individual w really move.
  for (const char* kind : {"star", "one-peer-exponential", "ring"}) {
    CAPTURE(kind);
    const int n = 4;
    const auto results = train_peers(kind, n, "sgp");
    double mass = 0.0;
    bool some_weight_moved = false;
    std::vector<std::vector<float>> z;
    for (const auto& r : results) {
      mass += r.summary.weight.value();
      some_weight_moved |= std::abs(r.summary.weight.value() - 1.0) > 1e-3;
      CHECK(r.summary.final_test_accuracy > 0.9);
      CHECK(r.summary.rejected_messages == 0u);
      z.push_back(r.z);
    }
    CHECK(mass == doctest::Approx(n).epsilon(1e-12));
    if (std::string(kind) == "star") CHECK(some_weight_moved);
    CHECK(monitor::relative_consensus_error(z) < 1e-2);
  }
}

TEST_CASE("overlap SGP, D-PSGD and exact averaging train in the same code path") {
  for (const char* algo : {"osgp", "dpsgd", "exact"}) {
    CAPTURE(algo);
    const auto results =
        train_peers(std::string(algo) == "exact" ? "complete" : "bidirectional-ring", 4, algo);
    std::vector<std::vector<float>> z;
    for (const auto& r : results) {
      CHECK(r.summary.final_test_accuracy > 0.9);
      z.push_back(r.z);
    }
    // exact averaging leaves every peer with the same model after every round.
    CHECK(monitor::relative_consensus_error(z) < (std::string(algo) == "exact" ? 1e-10 : 1e-2));
  }
}

TEST_CASE("local peers do not communicate and drift apart") {
  const auto results = train_peers("ring", 3, "local");
  std::vector<std::vector<float>> z;
  for (const auto& r : results) {
    CHECK_FALSE(r.summary.weight.has_value());
    z.push_back(r.z);
  }
  CHECK(monitor::relative_consensus_error(z) > 1e-4);
}

TEST_CASE("consensus error of known vectors") {
  // mean (1, 1); distances 1 and 1 -> mean squared distance 1; |mean|^2 = 2.
  CHECK(monitor::relative_consensus_error({{0.0f, 1.0f}, {2.0f, 1.0f}}) == doctest::Approx(0.5));
  CHECK(monitor::relative_consensus_error({{3.0f, 4.0f}, {3.0f, 4.0f}}) == 0.0);
}

#include <fstream>

#include "subprocess.hpp"

namespace {
// A snapshot as the monitor receives it; `corrupt` flips a payload byte after hashing.
transport::Message snapshot(int rank, std::int64_t iteration, std::vector<float> z,
                            bool corrupt = false) {
  auto header = std::make_shared<std::array<std::byte, gossip::kHeaderBytes>>(
      gossip::snapshot_header(rank, iteration, z));
  auto payload = std::make_shared<std::vector<float>>(std::move(z));
  if (corrupt) (*payload)[0] += 1.0f;
  std::vector<std::span<const std::byte>> frames = {
      std::span<const std::byte>(*header), std::as_bytes(std::span<const float>(*payload))};
  auto owner = std::make_shared<std::pair<decltype(header), decltype(payload)>>(header, payload);
  return transport::Message(std::move(frames), owner);
}
}  // namespace

TEST_CASE("the consensus monitor computes the exact error, rejects damage, bounds its memory") {
  SGP_SKIP_WITHOUT_FASHION_MNIST();  // it evaluates the average model on the real test set
  sgp::testing::TempDir dir;
  // MLP 784-4-10: 784*4 + 4 + 4*10 + 10 = 3190 parameters.
  monitor::ConsensusMonitor monitor({4}, "", 2, dir / "monitor.jsonl");
  const std::size_t n = 3190;
  std::vector<float> a(n, 1.0f), b(n, 3.0f);  // mean 2: relative error (1^2) / (2^2) = 0.25
  CHECK(!monitor.add(snapshot(0, 10, a)));
  CHECK(!monitor.add(snapshot(1, 10, b, true)));  // damaged: rejected, not applied
  CHECK(monitor.rejected() == 1);
  const auto record = monitor.add(snapshot(1, 10, b));
  REQUIRE(record);
  CHECK(record->iteration == 10);
  CHECK(record->consensus_error == doctest::Approx(0.25).epsilon(1e-12));
  // A stale iteration is refused; a flood of never-completing ones stays bounded.
  CHECK(!monitor.add(snapshot(0, 5, a)));
  CHECK(monitor.rejected() == 2);
  for (std::int64_t it = 11; it < 200; ++it) CHECK(!monitor.add(snapshot(0, it, a)));
  const auto last = monitor.add(snapshot(1, 199, a));
  REQUIRE(last);
  CHECK(last->consensus_error == 0.0);
  CHECK(monitor.add(snapshot(1, 150, a)) == std::nullopt);  // older than the newest record
  // Every snapshot given up is counted: 181 iterations pushed out by newer ones, and the 7
  // incomplete ones below 199 when it completed.
  CHECK(monitor.dropped() == 188);
  CHECK(monitor.summary().dropped_snapshots == 188);
  // Far-future iterations from one rank take the pending slots: the real iteration that comes
  // after them is given up, and counted, not lost silently.
  for (std::int64_t it = 1'000'000'000; it < 1'000'000'008; ++it) monitor.add(snapshot(0, it, a));
  CHECK(!monitor.add(snapshot(0, 300, a)));
  CHECK(monitor.dropped() == 189);
  std::ifstream log(dir / "monitor.jsonl");
  std::string line;
  int lines = 0;
  while (std::getline(log, line)) ++lines;
  CHECK(lines == 2);
}
