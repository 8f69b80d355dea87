// The consensus monitor (sgp/monitor/consensus_monitor.hpp): the exact consensus error, damaged
// and stale snapshots, bounded memory, resumed runs, settings that do not match the peers', a
// program's consensus-only monitor, mass drift, and the wait of a run's last snapshot.
#include <array>
#include <chrono>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "sgp/gossip/snapshot_publisher.hpp"
#include "sgp/monitor/consensus_monitor.hpp"
#include "sgp/topology/generator.hpp"
#include "sgp/transport/snapshot_channel.hpp"
#include "support/skip.hpp"
#include "support/temp_dir.hpp"
#include "support/text.hpp"

using namespace sgp;

TEST_CASE("consensus error of known vectors") {
  // mean (1, 1); distances 1 and 1 -> mean squared distance 1; |mean|^2 = 2.
  CHECK(monitor::relative_consensus_error({{0.0f, 1.0f}, {2.0f, 1.0f}}) == doctest::Approx(0.5));
  CHECK(monitor::relative_consensus_error({{3.0f, 4.0f}, {3.0f, 4.0f}}) == 0.0);
}

namespace {
// A snapshot as the monitor receives it; `corrupt` flips a payload byte after hashing.
transport::Message snapshot(int rank, std::int64_t iteration, std::vector<float> z,
                            bool corrupt = false, double weight = 1.0) {
  auto header = std::make_shared<std::array<std::byte, gossip::kHeaderBytes>>(
      gossip::snapshot_header(rank, iteration, z, weight));
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
  monitor::ConsensusMonitor monitor("mlp:4", "", 2, dir / "monitor.jsonl");
  const std::size_t n = 3190;
  std::vector<float> a(n, 1.0f), b(n, 3.0f);  // mean 2: relative error (1^2) / (2^2) = 0.25
  CHECK(!monitor.add(snapshot(0, 10, a)));
  CHECK(!monitor.add(snapshot(1, 10, b, true)));  // damaged: rejected, not applied
  CHECK(monitor.rejected() == 1);
  const auto record = monitor.add(snapshot(1, 10, b));
  REQUIRE(record);
  CHECK(record->iteration == 10);
  CHECK(record->consensus_error == doctest::Approx(0.25).epsilon(1e-12));
  // A stale iteration is refused.
  CHECK(!monitor.add(snapshot(0, 5, a)));
  CHECK(monitor.rejected() == 2);
  // Rank 1 falls silent (died or left): an iteration that 4 newer ones have overtaken is
  // recorded with the snapshots it has, so memory stays bounded and the survivors are followed.
  std::optional<monitor::MonitorRecord> partial;
  for (std::int64_t it = 11; it < 200; ++it) {
    if (auto r = monitor.add(snapshot(0, it, a))) partial = r;
  }
  REQUIRE(partial);
  CHECK(partial->iteration == 195);
  CHECK(partial->peers == 1);
  CHECK(partial->sum_of_weights == 1.0);
  CHECK(partial->consensus_error == 0.0);
  CHECK(monitor.add(snapshot(1, 150, a)) == std::nullopt);  // older than the newest record
  // Nothing was given up: the silent rank's iterations became partial records.
  CHECK(monitor.dropped() == 0);
  // Far-future iterations (a buggy or hostile sender) are refused and counted; they take no
  // pending slot, so the real iteration after them is recorded.
  const auto rejected_before = monitor.rejected();
  for (std::int64_t it = 1'000'000'000; it < 1'000'000'008; ++it) monitor.add(snapshot(0, it, a));
  CHECK(monitor.rejected() == rejected_before + 8);
  const auto next = monitor.add(snapshot(0, 300, a));  // a fifth pending iteration: 196 is due
  REQUIRE(next);
  CHECK(next->iteration == 196);
  monitor.flush();  // the end of the run: 196..199 and 300 with what they have
  CHECK(monitor.records().back().iteration == 300);
  CHECK(monitor.dropped() == 0);
  std::ifstream log(dir / "monitor.jsonl");
  std::string line;
  int lines = 0;
  while (std::getline(log, line)) ++lines;
  CHECK(lines == 1 + (195 - 11 + 1) + 4 + 1);
}

TEST_CASE("a resumed run's monitor drops the records it is about to write again") {
  SGP_SKIP_WITHOUT_FASHION_MNIST();
  sgp::testing::TempDir dir;
  const auto log = dir / "monitor.jsonl";
  // The first attempt recorded iterations 10, 20 and 30, then stopped; its peers resume from a
  // checkpoint at iteration 15, so the new monitor's first record is of iteration 20.
  std::ofstream(log) << "{\"iteration\":10}\n{\"iteration\":20}\n{\"iteration\":30}\n";
  monitor::ConsensusMonitor monitor("mlp:4", "", 1, log);
  const std::vector<float> z(3190, 1.0f);
  REQUIRE(monitor.add(snapshot(0, 20, z)));
  REQUIRE(monitor.add(snapshot(0, 30, z)));
  std::vector<std::int64_t> iterations;
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);)
    iterations.push_back(nlohmann::json::parse(line)["iteration"].get<std::int64_t>());
  CHECK(iterations == std::vector<std::int64_t>{10, 20, 30});
}

TEST_CASE("a monitor started with other settings than the peers says what does not match") {
  SGP_SKIP_WITHOUT_FASHION_MNIST();
  sgp::testing::TempDir dir;
  monitor::ConsensusMonitor monitor("mlp:4", "", 2, dir / "monitor.jsonl");  // 3190 parameters
  CHECK_FALSE(monitor.add(snapshot(0, 10, std::vector<float>(3190, 1.0f))));
  CHECK_FALSE(monitor.summary().settings_mismatch);  // a good snapshot, waiting for rank 1
  // The peers train mlp:8 (784*8 + 8 + 8*10 + 10 = 6370 parameters).
  CHECK_FALSE(monitor.add(snapshot(1, 10, std::vector<float>(6370, 1.0f))));
  const auto mismatch = monitor.summary().settings_mismatch;
  REQUIRE(mismatch);
  CHECK(sgp::testing::contains(*mismatch, "6370 parameters"));
  CHECK(sgp::testing::contains(*mismatch, "'mlp:4' has 3190"));
  CHECK(sgp::testing::contains(*mismatch, "sgp monitor --config RUN_DIR/config.json"));
  // More peers than the monitor was told of.
  monitor::ConsensusMonitor two("mlp:4", "", 2, dir / "two.jsonl");
  CHECK_FALSE(two.add(snapshot(3, 10, std::vector<float>(3190, 1.0f))));
  REQUIRE(two.summary().settings_mismatch);
  CHECK(sgp::testing::contains(*two.summary().settings_mismatch, "expects 2 peers (ranks 0..1)"));
}

TEST_CASE("a consensus-only monitor takes its size from the first sound snapshot") {
  sgp::testing::TempDir dir;  // a program's peers (sgp launch -- COMMAND): no model, no data
  monitor::ConsensusMonitor monitor(2, dir / "monitor.jsonl");
  CHECK_FALSE(monitor.add(snapshot(0, 4, std::vector<float>(6, 1.0f), true)));  // damaged
  CHECK_FALSE(monitor.add(snapshot(0, 4, {1.0f, 1.0f, 1.0f})));                 // fixes 3
  CHECK_FALSE(monitor.add(snapshot(1, 4, std::vector<float>(6, 3.0f))));        // refused
  REQUIRE(monitor.summary().settings_mismatch);
  CHECK(sgp::testing::contains(
      *monitor.summary().settings_mismatch,
      "rank 1 sends snapshots of 6 parameters, but the first snapshot had 3"));
  const auto record = monitor.add(snapshot(1, 4, {3.0f, 3.0f, 3.0f}));
  REQUIRE(record);
  CHECK(record->consensus_error == doctest::Approx(0.25).epsilon(1e-12));
  CHECK_FALSE(record->average_model_accuracy);
  CHECK(monitor.rejected() == 2);
}

TEST_CASE("the monitor flags mass drift where mass is conserved, and takes asgp's weights") {
  SGP_SKIP_WITHOUT_FASHION_MNIST();
  sgp::testing::TempDir dir;
  const std::vector<float> z(3190, 1.0f);  // mlp:4
  monitor::ConsensusMonitor sync("mlp:4", "", 2, dir / "sync.jsonl", monitor::MassModel::conserved);
  sync.add(snapshot(0, 10, z, false, 0.75));
  const auto kept = sync.add(snapshot(1, 10, z, false, 1.25));  // 2: nothing lost
  REQUIRE(kept);
  CHECK_FALSE(kept->mass_drift);
  sync.add(snapshot(0, 20, z, false, 0.75));
  const auto lost = sync.add(snapshot(1, 20, z, false, 1.0));  // 1.75: a quarter went missing
  REQUIRE(lost);
  CHECK(lost->mass_drift);
  CHECK(lost->sum_of_weights == 1.75);
  CHECK(sync.summary().mass_drift_records == 1);
  CHECK_FALSE(sync.add(snapshot(0, 30, z, false, 3.5)));  // beyond any push-sum weight: refused
  CHECK(sync.rejected() == 1);
  // asgp: weights above N are legitimate (restarts from z set w = 1), and no sum is promised.
  monitor::ConsensusMonitor async("mlp:4", "", 2, dir / "async.jsonl",
                                  monitor::MassModel::in_flight);
  async.add(snapshot(0, 10, z, false, 7.5));
  const auto record = async.add(snapshot(1, 10, z, false, 0.001));
  REQUIRE(record);
  CHECK(record->sum_of_weights == doctest::Approx(7.501));
  CHECK_FALSE(record->mass_drift);
  CHECK(async.rejected() == 0);
  CHECK(monitor::mass_model_of(sgp::config::Algorithm::sgp) == monitor::MassModel::conserved);
  CHECK(monitor::mass_model_of(sgp::config::Algorithm::local) == monitor::MassModel::conserved);
  CHECK(monitor::mass_model_of(sgp::config::Algorithm::asgp) == monitor::MassModel::in_flight);
  CHECK(monitor::mass_model_of(sgp::config::Algorithm::osgp) == monitor::MassModel::in_flight);
}

// A run of a few milliseconds (a local run of 3 iterations) ended before its connection to the
// monitor did, and its final snapshot was dropped: the run had no final evaluation. A last
// snapshot waits for that connection; the others never wait.
TEST_CASE("a run's last snapshot waits for the monitor's connection; the others never wait") {
  using namespace std::chrono_literals;
  const std::vector<float> z{1.0f, 2.0f, 3.0f};
  {
    transport::SnapshotReceiver receiver("tcp://127.0.0.1:*");
    gossip::SnapshotPublisher publisher(receiver.endpoint(), 1);
    REQUIRE(publisher.publish(3, z, 1.0, true));  // at once after connecting
    const auto received = receiver.receive(5000ms);
    REQUIRE(received);
    CHECK(received->frame(1).size() == z.size() * sizeof(float));
    CHECK(publisher.dropped() == 0);
  }
  // Nobody at the endpoint: an ordinary snapshot is dropped, and so is a last one after its wait.
  gossip::SnapshotPublisher nobody(topology::free_local_endpoints(1).at(0), 0);
  CHECK_FALSE(nobody.publish(1, z));
  CHECK_FALSE(nobody.publish(2, z, 1.0, true));
  CHECK(nobody.dropped() == 2);
}
