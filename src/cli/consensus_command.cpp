// `sgp consensus`: pure push-sum average consensus over ZeroMQ, no training. Every peer starts
// from a seeded integer vector; the vectors are built so that their global mean is an integer
// vector known in advance (exact in float32), and every round each peer reports its distance to
// that mean. `--local` runs every peer of the topology as a process on this host and then reports
// the consensus error per round.
//
// Definitions (written to the run directory too):
//   distance_to_mean (peer i, round k) = ||z_i - m|| / ||m||, z_i = x_i / w_i, m the exact mean;
//   consensus_error (round k) = mean_i ||z_i - m||^2 / ||m||^2 (against the exact mean, which
//   bounds the usual mean_i ||z_i - zbar||^2 / ||zbar||^2 from above when zbar = m).
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "local_processes.hpp"
#include "sgp/compute/device.hpp"
#include "sgp/compute/device_buffer.hpp"
#include "sgp/error.hpp"
#include "sgp/gossip/push_sum_engine.hpp"
#include "sgp/gossip/zmq_peer.hpp"
#include "sgp/log.hpp"
#include "sgp/peer/run_directory.hpp"
#include "sgp/topology/dot_file.hpp"
#include "training_flags.hpp"

namespace sgp::cli {
namespace {

struct ConsensusOptions {
  std::string topology;
  bool local = false;
  int rank = -1;
  int rounds = 50;
  std::string mode = "sync";
  std::size_t dim = 1000;
  int tau = 1;
  int timeout_ms = 30000;
  std::uint64_t seed = 0;
  std::string device = "cpu";
  std::string run_dir;
  std::string log_level = "info";
  std::string keys_dir;
  bool insecure = false;
};

std::uint64_t splitmix64(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// m[d]: an integer in [-100, 100]; every peer's own vector is m plus an integer deviation in
// [-15, 15], and the last rank's deviation is minus the sum of the others', so the mean is m.
double exact_mean(std::uint64_t seed, std::size_t d) {
  return static_cast<double>(splitmix64(seed * 0x100000001b3ull + d) % 201) - 100.0;
}
double deviation(std::uint64_t seed, int rank, std::size_t d) {
  return static_cast<double>(splitmix64(splitmix64(seed + 0x51ed27ull * (rank + 1)) + d) % 31) -
         15.0;
}
std::vector<float> initial_vector(std::uint64_t seed, int rank, int num_peers, std::size_t dim) {
  std::vector<float> x(dim);
  for (std::size_t d = 0; d < dim; ++d) {
    double v = exact_mean(seed, d);
    if (rank < num_peers - 1) {
      v += deviation(seed, rank, d);
    } else {
      for (int r = 0; r < num_peers - 1; ++r) v -= deviation(seed, r, d);
    }
    x[d] = static_cast<float>(v);
  }
  return x;
}

void run_peer(const ConsensusOptions& o, const topology::Schedule& schedule) {
  const auto mode = gossip::parse_mode(o.mode);
  auto backend = compute::make_backend({o.device, 1, false});
  const std::filesystem::path dir =
      o.run_dir.empty() ? peer::default_run_dir("consensus") : std::filesystem::path(o.run_dir);
  peer::RunDirectory run(dir, o.rank);
  const int n = schedule.num_peers();
  std::vector<float> mean_host(o.dim);
  for (std::size_t d = 0; d < o.dim; ++d) mean_host[d] = static_cast<float>(exact_mean(o.seed, d));
  compute::DeviceBuffer<float> x(*backend,
                                 std::span<const float>(initial_vector(o.seed, o.rank, n, o.dim)));
  compute::DeviceBuffer<float> mean(*backend, std::span<const float>(mean_host));
  compute::DeviceBuffer<float> z(*backend, o.dim);
  const double mean_norm2 = backend->squared_norm(mean.data(), o.dim);

  transport::ZmqOptions zmq;
  zmq.send_timeout = std::chrono::milliseconds(o.timeout_ms);
  zmq.linger = std::chrono::milliseconds(o.timeout_ms);
  gossip::PushSumConfig config;
  auto transport =
      gossip::open_zmq_transport(schedule, o.rank, gossip::Chunking(o.dim, config.chunk_elements),
                                 {o.keys_dir, o.insecure}, zmq);
  config.mode = mode;
  config.tau = o.tau;
  config.timeout = std::chrono::milliseconds(o.timeout_ms);
  gossip::PushSumEngine engine(*backend, schedule, *transport, x.data(), o.dim, config);
  spdlog::info("peer {} of {} at {}: {} rounds of {} push-sum, {} floats, {}", o.rank, n,
               transport->endpoint(), o.rounds, o.mode, o.dim, backend->describe());

  const auto start = std::chrono::steady_clock::now();
  auto report = [&](std::int64_t round, bool final) {
    engine.debias(z.data());
    const double distance =
        std::sqrt(backend->squared_distance(z.data(), mean.data(), o.dim) / mean_norm2);
    const auto m = engine.metrics();
    nlohmann::json record{
        {"round", round},
        {"weight", engine.weight()},
        {"distance_to_mean", distance},
        {"wall_time",
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()},
        {"bytes_sent", m.bytes_sent},
        {"bytes_received", m.bytes_received},
        {"wait_seconds", m.wait_seconds},
        {"rejected", m.rejected_total()},
    };
    if (final) record["final"] = true;
    run.log(record);
    spdlog::info("{} {:>5}: weight {:.6f}, |z - mean| / |mean| = {:.3e}",
                 final ? "final after round" : "round", round, engine.weight(), distance);
  };
  for (int k = 0; k < o.rounds; ++k) {
    engine.mix();
    report(engine.round(), false);
  }
  engine.finish();
  report(engine.round(), true);
  const auto m = engine.metrics();
  for (int c = 0; c < gossip::kNumRejectCauses; ++c) {
    if (m.rejected[c]) {
      spdlog::warn("rejected {} message(s): {}", m.rejected[c],
                   gossip::reject_cause_name(static_cast<gossip::RejectCause>(c)));
    }
  }
  spdlog::info("done: sent {} B, received {} B, waited {:.3f} s; results in {}", m.bytes_sent,
               m.bytes_received, m.wait_seconds, run.path().string());
}

void run_local(const ConsensusOptions& o, const topology::Schedule& schedule) {
  gossip::parse_mode(o.mode);  // a bad --mode fails here, not in N children
  const int n = schedule.num_peers();
  const std::filesystem::path dir =
      o.run_dir.empty() ? peer::default_run_dir("consensus") : std::filesystem::path(o.run_dir);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    throw InputError(fmt::format("--run-dir {}: cannot create it: {}", dir.string(), ec.message()));
  }
  nlohmann::json config{{"command", "consensus"},
                        {"topology", o.topology},
                        {"peers", n},
                        {"rounds", o.rounds},
                        {"mode", o.mode},
                        {"dim", o.dim},
                        {"tau", o.tau},
                        {"timeout_ms", o.timeout_ms},
                        {"seed", o.seed},
                        {"device", o.device}};
  peer::write_file_atomically(dir / "config.json", config.dump(2) + "\n");

  std::vector<ChildSpec> children;
  for (int r = 0; r < n; ++r) {
    children.push_back(ChildSpec{r,
                                 {"consensus",
                                  "--topology",
                                  o.topology,
                                  "--rank",
                                  std::to_string(r),
                                  "--rounds",
                                  std::to_string(o.rounds),
                                  "--mode",
                                  o.mode,
                                  "--dim",
                                  std::to_string(o.dim),
                                  "--tau",
                                  std::to_string(o.tau),
                                  "--timeout-ms",
                                  std::to_string(o.timeout_ms),
                                  "--seed",
                                  std::to_string(o.seed),
                                  "--device",
                                  o.device,
                                  "--run-dir",
                                  dir.string(),
                                  "--log-level",
                                  o.log_level},
                                 dir / fmt::format("peer-{}.log", r)});
  }
  for (auto& child : children) {
    if (!o.keys_dir.empty()) child.args.insert(child.args.end(), {"--keys", o.keys_dir});
    if (o.insecure) child.args.push_back("--insecure");
  }
  spdlog::info("starting {} peers on this host; logs in {}/peer-<rank>.log", n, dir.string());
  LocalProcesses processes(std::move(children));
  const auto failure = processes.wait();
  if (processes.interrupted()) {
    throw IoError(fmt::format("interrupted by {}; every peer was stopped",
                              strsignal(processes.interrupted())));
  }
  if (failure) throw IoError(failure->describe());

  // Consensus error per round from the peers' records.
  std::map<std::int64_t, std::vector<double>> distances;
  for (int r = 0; r < n; ++r) {
    const auto path = dir / fmt::format("peer-{}.jsonl", r);
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      const auto rec = nlohmann::json::parse(line);
      if (rec.contains("final")) continue;
      distances[rec["round"].get<std::int64_t>()].push_back(rec["distance_to_mean"].get<double>());
    }
  }
  std::ofstream out(dir / "consensus.jsonl");
  const std::int64_t every = std::max<std::int64_t>(1, o.rounds / 20);
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
    if (round % every == 0 || round == o.rounds) {
      fmt::print("round {:>5}: consensus error {:.3e}, max |z_i - mean| / |mean| {:.3e}\n", round,
                 error, worst);
    }
  }
  peer::write_file_atomically(dir / "summary.json", last.dump(2) + "\n");
  fmt::print("{} peers, {} rounds ({}): final consensus error {:.3e}; results in {}\n", n, o.rounds,
             o.mode, last.value("consensus_error", 0.0), dir.string());
}

}  // namespace

void add_consensus_command(CLI::App& app) {
  auto o = std::make_shared<ConsensusOptions>();
  CLI::App* cmd = app.add_subcommand(
      "consensus",
      "Pure push-sum average consensus over ZeroMQ (no training): every peer starts from a "
      "seeded vector whose global mean is known exactly, and reports its distance to it every "
      "round. Run one peer with --rank, or every peer of the topology on this host with --local.");
  cmd->add_option("--topology", o->topology, "topology DOT file with an endpoint per node")
      ->required();
  cmd->add_flag("--local", o->local, "spawn every peer of the topology as a process on this host");
  cmd->add_option("--rank", o->rank, "run this one peer");
  cmd->add_option("--rounds", o->rounds, "gossip rounds")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--mode", o->mode, "sync (SGP) or overlap (OSGP)")->capture_default_str();
  cmd->add_option("--dim", o->dim, "vector length (floats)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--tau", o->tau, "overlap mode: how many rounds a neighbour may lag")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--timeout-ms", o->timeout_ms,
                  "longest wait for a peer's message before failing, naming the peer")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seed", o->seed, "seed of the initial vectors")->capture_default_str();
  cmd->add_option("--device", o->device, "cpu, cuda or cuda:<index> (vector operations)")
      ->capture_default_str();
  cmd->add_option("--run-dir", o->run_dir,
                  "where to write results (default runs/consensus-<time>)");
  cmd->add_option("--log-level", o->log_level, "trace, debug, info, warn, error or off")
      ->capture_default_str();
  add_security_flags(*cmd, o->keys_dir, o->insecure, "Security");
  cmd->callback([o] {
    if (o->local == (o->rank >= 0)) {
      throw InputError("sgp consensus: give exactly one of --local (every peer) or --rank R");
    }
    configure_logging(o->local ? -1 : o->rank, o->log_level);
    topology::DotReadOptions read_options;
    read_options.require_endpoints = true;
    const auto schedule = topology::read_dot_file(o->topology, read_options);
    if (o->rank >= schedule.num_peers()) {
      throw InputError(fmt::format("--rank {}: the topology {} has ranks 0..{}", o->rank,
                                   o->topology, schedule.num_peers() - 1));
    }
    if (o->local) {
      run_local(*o, schedule);
    } else {
      run_peer(*o, schedule);
    }
  });
}

}  // namespace sgp::cli
