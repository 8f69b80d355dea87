#include "sgp/launch/consensus_run.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <numeric>

#include <nlohmann/json.hpp>

#include "sgp/compute/device.hpp"
#include "sgp/compute/device_buffer.hpp"
#include "sgp/config/engine_settings.hpp"
#include "sgp/config/settings.hpp"
#include "sgp/error.hpp"
#include "sgp/gossip/consensus_vectors.hpp"
#include "sgp/gossip/mixer.hpp"
#include "sgp/launch/child_credentials.hpp"
#include "sgp/launch/local_processes.hpp"
#include "sgp/launch/picked_ports.hpp"
#include "sgp/log.hpp"
#include "sgp/named_values.hpp"
#include "sgp/peer/peer_runner.hpp"
#include "sgp/run/file_names.hpp"
#include "sgp/run/run_directory.hpp"
#include "sgp/run/run_files.hpp"
#include "sgp/topology/dot_file.hpp"

namespace sgp::launch {
namespace {

constexpr std::chrono::milliseconds kAsyncPace{5};

void log_rejects(const gossip::PushSumMetrics& m) {
  for (int c = 0; c < gossip::kNumRejectCauses; ++c) {
    if (m.rejected[c]) {
      spdlog::warn("rejected {} message(s): {}", m.rejected[c],
                   gossip::reject_cause_name(static_cast<gossip::RejectCause>(c)));
    }
  }
}

std::filesystem::path run_dir_of(const ConsensusOptions& o) {
  return o.shared.run_dir.empty() ? run::create_default_run_dir("consensus")
                                  : std::filesystem::path(o.shared.run_dir);
}

// Consensus error per round from the peers' records, written to consensus.jsonl; returns the
// last round's record.
nlohmann::json consensus_per_round(const std::filesystem::path& dir, int n, int rounds) {
  std::map<std::int64_t, std::vector<double>> distances;
  std::vector<double> finals;   // after finish(): asgp mixes on until every peer is done
  std::uint64_t shm_bytes = 0;  // payload bytes the peers sent through shared memory
  std::uint64_t zmq_bytes = 0;  // and every byte they sent over ZeroMQ
  for (int r = 0; r < n; ++r) {
    std::ifstream in(dir / run::peer_log_file(r));
    std::string line;
    while (std::getline(in, line)) {
      const auto rec = nlohmann::json::parse(line);
      if (rec.contains("final")) {
        finals.push_back(rec["distance_to_mean"].get<double>());
        shm_bytes += rec.value("shm_bytes", std::uint64_t{0});
        zmq_bytes += rec.value("zmq_bytes", std::uint64_t{0});
        continue;
      }
      distances[rec["round"].get<std::int64_t>()].push_back(rec["distance_to_mean"].get<double>());
    }
  }
  std::ofstream out(dir / run::kConsensusLogFile);
  const std::int64_t every = std::max(1, rounds / 20);
  nlohmann::json last;
  for (const auto& [round, ds] : distances) {
    if (static_cast<int>(ds.size()) != n) {
      throw IoError(fmt::format("round {}: {} of {} peers recorded it", round, ds.size(), n));
    }
    double error = 0, worst = 0;
    for (double d : ds) {
      error += d * d / n;
      worst = std::max(worst, d);
    }
    last = {{"round", round}, {"consensus_error", error}, {"max_distance_to_mean", worst}};
    out << last.dump() << "\n";
    if (round % every == 0 || round == rounds) {
      fmt::print("round {:>5}: consensus error {:.3e}, max |z_i - mean| / |mean| {:.3e}\n", round,
                 error, worst);
    }
  }
  if (static_cast<int>(finals.size()) == n) {
    double error = 0, worst = 0;
    for (double d : finals) {
      error += d * d / n;
      worst = std::max(worst, d);
    }
    last["final_consensus_error"] = error;
    last["final_max_distance_to_mean"] = worst;
    last["shm_bytes"] = shm_bytes;
    last["zmq_bytes"] = zmq_bytes;
    fmt::print("final:       consensus error {:.3e}, max |z_i - mean| / |mean| {:.3e}\n", error,
               worst);
  }
  return last;
}

}  // namespace

namespace {

// Each round's record of one consensus peer in peer-<rank>.jsonl: its distance to the exact mean
// (relative to the mean's norm), its weight and its transport's counters.
class RoundReport {
 public:
  RoundReport(compute::Backend& backend, const ConsensusOptions& o, run::RunDirectory& run)
      : backend_(backend),
        dim_(o.dim),
        mean_(backend, std::span<const float>(gossip::consensus_mean_vector(o.shared.seed, o.dim))),
        z_(backend, o.dim),
        mean_norm2_(backend.squared_norm(mean_.data(), o.dim)),
        run_(run) {}

  // `transport`: for the final record, what it carried (shm_bytes summed by --local).
  void operator()(gossip::Mixer& engine, std::int64_t round, bool final,
                  const peer::PeerTransport* transport = nullptr) {
    engine.debias(z_.data());
    const double distance =
        std::sqrt(backend_.squared_distance(z_.data(), mean_.data(), dim_) / mean_norm2_);
    const auto m = engine.metrics();
    nlohmann::json record{
        {"round", round},
        {"weight", engine.weight()},
        {"distance_to_mean", distance},
        {"wall_time",
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count()},
        {"bytes_sent", m.bytes_sent},
        {"bytes_received", m.bytes_received},
        {"wait_seconds", m.wait_seconds},
        {"rejected", m.rejected_total()},
        {"skipped_sends", m.skipped_sends},
        {"resent_pushes", m.resent_pushes},
        {"held_rounds", m.held_rounds},
        {"partner_waits", m.partner_waits},
        {"superseded_messages", m.superseded_messages},
        {"full_drains", m.full_drains},
        {"messages_received", m.messages_received},
    };
    if (final) record["final"] = true;
    if (transport) {
      const transport::ShmStats shm = transport->shm_stats();
      record["shm_bytes"] = shm.shm_bytes;
      record["shm_messages"] = shm.shm_messages;
      record["shm_inline_messages"] = shm.inline_messages;
      record["shm_refused"] = shm.refused_total();
      record["zmq_bytes"] = transport->zmq->bytes_sent();
    }
    run_.log(record);
    spdlog::info("{} {:>5}: weight {:.6f}, |z - mean| / |mean| = {:.3e}",
                 final ? "final after round" : "round", round, engine.weight(), distance);
  }

 private:
  compute::Backend& backend_;
  std::size_t dim_;
  compute::DeviceBuffer<float> mean_;
  compute::DeviceBuffer<float> z_;
  double mean_norm2_;
  run::RunDirectory& run_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace

void run_consensus_peer(const ConsensusOptions& o, const topology::Schedule& schedule, int rank) {
  const config::TrainConfig& c = o.shared;
  auto backend = compute::make_backend({c.device, 1, false});
  run::RunDirectory run(run_dir_of(o), rank);
  run.claim({run::run_start_of(c), {rank}, false});
  const int n = schedule.num_peers();
  compute::DeviceBuffer<float> x(
      *backend, std::span<const float>(gossip::consensus_initial_vector(c.seed, rank, n, o.dim)));

  const auto transport =
      peer::open_peer_transport(c, schedule, rank, o.dim, config::security(c), o.mode);
  gossip::PushSumConfig config;
  config.mode = o.mode;
  config.tau = c.tau;
  config.timeout = std::chrono::milliseconds(c.timeout_ms);
  config.running_sums = c.running_sums;
  config.acked_pushes = c.acked_pushes;
  config.compression = c.compress.format;
  config.compressor = c.compress.compressor;
  config.consensus_step = c.consensus_step;
  const auto engine_ptr =
      gossip::make_mixer(*backend, schedule, *transport.active(), x.data(), o.dim, config);
  gossip::Mixer& engine = *engine_ptr;
  spdlog::info("peer {} of {} at {}: {} rounds of {} push-sum, {} floats, {}", rank, n,
               transport.zmq->endpoint(), o.rounds, name_of(o.mode), o.dim, backend->describe());

  RoundReport report(*backend, o, run);
  for (int k = 0; k < o.rounds; ++k) {
    // asgp: nobody waits, so pace the rounds by what arrives (at most kAsyncPace apart).
    engine.idle(kAsyncPace);
    engine.step(engine.round());
    report(engine, engine.round(), false);
  }
  engine.finish();
  report(engine, engine.round(), true, &transport);
  const auto m = engine.metrics();
  log_rejects(m);
  spdlog::info("done: sent {} B, received {} B, waited {:.3f} s; results in {}", m.bytes_sent,
               m.bytes_received, m.wait_seconds, run.path().string());
}

void run_consensus_local(const ConsensusOptions& o, const topology::Schedule& given) {
  topology::Schedule schedule = given;
  const int n = schedule.num_peers();
  std::vector<int> every_rank(static_cast<std::size_t>(n));
  std::iota(every_rank.begin(), every_rank.end(), 0);
  PickedPorts picked;
  picked.pick(schedule, every_rank);  // for endpoints with port 0
  const std::filesystem::path dir = run_dir_of(o);
  run::RunDirectory run(dir, -1);
  run.claim({run::run_start_of(o.shared), {}, false});
  std::string topology_file = o.topology;
  if (picked.any()) {
    topology_file = (dir / "topology-readdressed.dot").string();
    run::write_file_atomically(
        topology_file, topology::to_dot(schedule, o.topology + " with free ports this run picked"));
  }
  ConsensusOptions child = o;
  child.shared.overwrite = false;  // done here
  child.shared.run_dir = dir.string();
  nlohmann::json config{{"command", "consensus"}, {"topology", o.topology},  {"peers", n},
                        {"rounds", o.rounds},     {"mode", name_of(o.mode)}, {"dim", o.dim}};
  const nlohmann::json shared = child.shared;
  for (auto key : kConsensusSettings) config[std::string(key)] = shared[std::string(key)];
  run.write_json(run::kRunConfigFile, config);

  std::unique_ptr<ChildCredentials> credentials;
  if (wants_run_credentials(o.shared, schedule, static_cast<std::size_t>(n)))
    credentials = std::make_unique<ChildCredentials>(dir, n, false);
  std::vector<ChildSpec> children;
  for (int r = 0; r < n; ++r) {
    std::vector<std::string> args = {"consensus",
                                     "--topology",
                                     topology_file,
                                     "--rank",
                                     std::to_string(r),
                                     "--rounds",
                                     std::to_string(o.rounds),
                                     "--mode",
                                     std::string(name_of(o.mode)),
                                     "--dim",
                                     std::to_string(o.dim)};
    const auto flags = config::setting_arguments(child.shared, kConsensusSettings);
    args.insert(args.end(), flags.begin(), flags.end());
    if (credentials) std::ranges::copy(credentials->arguments(r), std::back_inserter(args));
    children.push_back(ChildSpec{r, std::move(args), dir / run::peer_output_file(r)});
    picked.hand_to(children.back());
  }
  spdlog::info("starting {} peers on this host; logs in {}/peer-<rank>.log", n, dir.string());
  LocalProcesses processes(std::move(children));
  picked.release();
  const auto failure = processes.wait();
  if (processes.interrupted()) {
    throw IoError(fmt::format("interrupted by {}; every peer was stopped",
                              strsignal(processes.interrupted())));
  }
  if (failure) throw IoError(failure->describe());

  const nlohmann::json last = consensus_per_round(dir, n, o.rounds);
  run.write_json(run::kSummaryFile, last);
  fmt::print("{} peers, {} rounds ({}): final consensus error {:.3e}; results in {}\n", n, o.rounds,
             name_of(o.mode), last.value("consensus_error", 0.0), dir.string());
}

}  // namespace sgp::launch
