// summary.json when several launchers (one per host) and a monitor share one run directory:
// whoever finishes last, seeing every peer, writes the complete one; an earlier one never
// replaces a summary that knows more.
#include <fstream>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "sgp/launch/run_summary.hpp"
#include "support/temp_dir.hpp"
#include "support/text.hpp"

using nlohmann::json;
using sgp::launch::summarize_launch;

namespace {

void write(const std::filesystem::path& path, const json& value) { std::ofstream(path) << value; }

json summary_in(const std::filesystem::path& dir) {
  return json::parse(sgp::testing::slurp(dir / "summary.json"));
}

void peer_finished(const std::filesystem::path& dir, int rank) {
  write(dir / ("peer-" + std::to_string(rank) + "-summary.json"),
        {{"rank", rank}, {"peers", 2}, {"iterations", 10}, {"weight", 1.0}});
}

}  // namespace

TEST_CASE("hosts sharing a run directory: the launcher that finishes last writes summary.json") {
  sgp::testing::TempDir dir;
  write(dir / "config.json", {{"command", "launch"}, {"peers", 2}});
  // Host a (rank 0) finishes while host b's rank 1 still runs: its log is here, no summary.
  peer_finished(dir.path(), 0);
  std::ofstream(dir / "peer-1.jsonl") << "{\"iteration\":5}\n";
  summarize_launch(dir.path(), {0}, {});
  CHECK(summary_in(dir.path())["missing_peers"] == json::array({1}));
  // Host b finishes: it sees both peers and replaces it.
  peer_finished(dir.path(), 1);
  summarize_launch(dir.path(), {1}, {});
  CHECK_FALSE(summary_in(dir.path()).contains("missing_peers"));
  CHECK(summary_in(dir.path())["sum_of_weights"] == 2.0);
  // A late merge that sees less (rank 1's summary gone from its view) leaves it alone.
  std::filesystem::remove(dir / "peer-1-summary.json");
  summarize_launch(dir.path(), {0}, {});
  CHECK_FALSE(summary_in(dir.path()).contains("missing_peers"));
  // One that knows more than the file replaces it, even with a rank still missing (a rank that
  // failed on another host never finishes).
  write(dir / "summary.json", {{"peers", 2}, {"missing_peers", {0, 1}}});
  summarize_launch(dir.path(), {0}, {});
  CHECK(summary_in(dir.path())["missing_peers"] == json::array({1}));
}

TEST_CASE("summary.json: ms/iteration is the median over the peers of their medians and means") {
  sgp::testing::TempDir dir;
  write(dir / "config.json", {{"command", "launch"}, {"peers", 3}});
  // Three time-sliced peers: steps of 2 ms uninterrupted, 3-5 ms on average.
  const double means[] = {3.0, 5.0, 4.0};
  for (int rank = 0; rank < 3; ++rank) {
    write(dir / ("peer-" + std::to_string(rank) + "-summary.json"),
          {{"rank", rank},
           {"peers", 3},
           {"iterations", 10},
           {"median_iteration_ms", 2.0 + rank},
           {"mean_iteration_ms", means[rank]}});
  }
  summarize_launch(dir.path(), {0, 1, 2}, {});
  CHECK(summary_in(dir.path())["median_iteration_ms"] == 3.0);
  CHECK(summary_in(dir.path())["mean_iteration_ms"] == 4.0);
}

TEST_CASE("summary.json: the peers' peak RSS, largest and median, of those that report it") {
  sgp::testing::TempDir dir;
  write(dir / "config.json", {{"command", "launch"}, {"peers", 4}});
  const std::int64_t peaks[] = {70 << 20, 90 << 20, 0, 80 << 20};  // rank 2: an old summary
  for (int rank = 0; rank < 4; ++rank) {
    nlohmann::json summary{{"rank", rank}, {"peers", 4}, {"iterations", 10}};
    if (peaks[rank] > 0) summary["peak_rss_bytes"] = peaks[rank];
    write(dir / ("peer-" + std::to_string(rank) + "-summary.json"), summary);
  }
  summarize_launch(dir.path(), {0, 1, 2, 3}, {});
  CHECK(summary_in(dir.path())["max_peak_rss_bytes"] == 90 << 20);
  CHECK(summary_in(dir.path())["median_peak_rss_bytes"] == 80 << 20);
}

TEST_CASE("summary.json: what the transports carried, summed over the peers that report it") {
  sgp::testing::TempDir dir;
  write(dir / "config.json", {{"command", "launch"}, {"peers", 3}});
  for (int rank = 0; rank < 3; ++rank) {
    nlohmann::json summary{{"rank", rank}, {"peers", 3}, {"iterations", 10}};
    if (rank != 1) {  // rank 1: a summary without a transport's fields
      summary["shm_bytes"] = 1000 * (rank + 1);
      summary["zmq_bytes"] = 10 * (rank + 1);
      summary["shm_inline_messages"] = rank;
      summary["shm_refused"] = 0;
    }
    write(dir / ("peer-" + std::to_string(rank) + "-summary.json"), summary);
  }
  summarize_launch(dir.path(), {0, 1, 2}, {});
  const auto summary = summary_in(dir.path());
  CHECK(summary["shm_bytes"] == 4000);
  CHECK(summary["zmq_bytes"] == 40);
  CHECK(summary["shm_inline_messages"] == 2);
  CHECK(summary["shm_refused"] == 0);
  // No peer with a transport (local-only peers): none of the fields.
  sgp::testing::TempDir local;
  write(local / "config.json", {{"command", "launch"}, {"peers", 1}});
  peer_finished(local.path(), 0);
  summarize_launch(local.path(), {0}, {});
  CHECK_FALSE(summary_in(local.path()).contains("shm_bytes"));
}

TEST_CASE("summary.json after a kill and a rejoin: rejoined and unevaluated peers said as such") {
  sgp::testing::TempDir dir;
  write(dir / "config.json", {{"command", "launch"}, {"peers", 4}});
  // The launcher saw ranks 1, 2 and 3 fail. Rank 1 stayed dead; rank 2 rejoined and evaluated;
  // rank 3 rejoined after the last evaluation, so it never evaluated (it reported 0.0 once).
  write(dir / "peer-0-summary.json",
        {{"rank", 0}, {"peers", 4}, {"iterations", 10}, {"final_test_accuracy", 0.82}});
  write(dir / "peer-2-summary.json", {{"rank", 2},
                                      {"peers", 4},
                                      {"iterations", 10},
                                      {"final_test_accuracy", 0.78},
                                      {"joined_at_iteration", 4}});
  write(dir / "peer-3-summary.json",
        {{"rank", 3}, {"peers", 4}, {"iterations", 10}, {"joined_at_iteration", 10}});
  summarize_launch(dir.path(), {0, 1, 2, 3}, {1, 2, 3});
  const json s = summary_in(dir.path());
  CHECK(s["failed_peers"] == json::array({1}));
  CHECK(s["missing_peers"] == json::array({1}));
  CHECK(s["rejoined_peers"] == json::array({2, 3}));
  CHECK(s["unevaluated_peers"] == json::array({3}));
  CHECK(s["min_peer_accuracy"].get<double>() == doctest::Approx(0.78));
  CHECK(s["max_peer_accuracy"].get<double>() == doctest::Approx(0.82));
  CHECK(s["mean_peer_accuracy"].get<double>() == doctest::Approx(0.80));
}
