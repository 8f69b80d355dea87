// `sgp launch`: starts every peer of the topology whose endpoint is on this host, plus (when all
// peers are local) the consensus monitor, shows one combined progress view, waits, and merges
// the results into <run-dir>/summary.json.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <atomic>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/ranges.h>
#include <fmt/std.h>

#include "commands.hpp"
#include "local_processes.hpp"
#include "periodic_task.hpp"
#include "sgp/error.hpp"
#include "sgp/gossip/zmq_peer.hpp"
#include "sgp/log.hpp"
#include "sgp/peer/consensus_monitor.hpp"
#include "sgp/peer/peer_runner.hpp"
#include "sgp/peer/run_directory.hpp"
#include "sgp/peer/run_summary.hpp"
#include "sgp/topology/schedule.hpp"
#include "sgp/transport/snapshot_channel.hpp"
#include "training_flags.hpp"

namespace sgp::cli {

namespace {

// The host part of "tcp://HOST:PORT".
std::string endpoint_host(const std::string& endpoint) {
  auto rest =
      endpoint.substr(endpoint.find("://") == std::string::npos ? 0 : endpoint.find("://") + 3);
  return rest.substr(0, rest.rfind(':'));
}

// Names and addresses under which this machine is reachable.
std::set<std::string> local_host_names() {
  std::set<std::string> names = {"localhost", "*", "0.0.0.0"};
  char hostname[256] = {};
  if (::gethostname(hostname, sizeof hostname - 1) == 0) names.insert(hostname);
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) == 0) {
    for (ifaddrs* a = list; a; a = a->ifa_next) {
      if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
      char text[INET_ADDRSTRLEN] = {};
      const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
      if (::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text)) names.insert(text);
    }
    ::freeifaddrs(list);
  }
  return names;
}

std::vector<int> ranks_on_this_host(const topology::Schedule& schedule) {
  const auto names = local_host_names();
  std::vector<int> ranks;
  for (int r = 0; r < schedule.num_peers(); ++r) {
    const auto host = endpoint_host(schedule.endpoint(r));
    if (names.count(host) || host.starts_with("127.")) ranks.push_back(r);
  }
  return ranks;
}

// One line with each local peer's latest iteration and loss (every few seconds while they run).
void log_combined_progress(const std::filesystem::path& dir, const std::vector<int>& ranks) {
  std::vector<std::string> parts;
  for (int r : ranks) {
    std::ifstream log(dir / fmt::format("peer-{}.jsonl", r));
    std::string line, last;
    while (std::getline(log, line)) last = line;
    try {
      const auto j = nlohmann::json::parse(last);
      parts.push_back(fmt::format("{}: it {} loss {:.3f}", r, j["iteration"].get<long>(),
                                  j["loss"].get<double>()));
    } catch (const std::exception&) {
      parts.push_back(fmt::format("{}: starting", r));
    }
  }
  spdlog::info("progress  {}", fmt::join(parts, " | "));
}

}  // namespace

void add_launch_command(CLI::App& app) {
  auto config = std::make_shared<peer::TrainConfig>();
  auto ranks = std::make_shared<std::vector<int>>();
  auto no_monitor = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "launch",
      "Start every peer of the topology whose endpoint is on this host (or --ranks), and the "
      "consensus monitor when all peers are here; show their progress, forward Ctrl-C, report a "
      "peer that dies, and write <run-dir>/summary.json. On several hosts, run the same command "
      "with the same topology file on each (and `sgp monitor` by hand, with --monitor).");
  cmd->add_option("--ranks", *ranks, "ranks to start here (default: those with a local endpoint)")
      ->delimiter(',');
  cmd->add_flag("--no-monitor", *no_monitor, "do not start the consensus monitor");
  add_training_flags(*cmd, *config);
  add_peer_flags(*cmd, *config);
  cmd->callback([config, ranks, no_monitor] {
    configure_logging(-1, config->log_level);
    peer::TrainConfig c = *config;
    const topology::Schedule schedule = peer::load_topology(c);
    const int n = schedule.num_peers();
    std::vector<int> local = ranks->empty() ? ranks_on_this_host(schedule) : *ranks;
    for (int r : local) {
      if (r < 0 || r >= n)
        throw InputError(
            fmt::format("--ranks: {} is not a rank of {} (0..{})", r, c.topology, n - 1));
    }
    if (local.empty()) {
      throw InputError(fmt::format("{}: no endpoint is on this host; give --ranks", c.topology));
    }
    if (c.run_dir.empty()) c.run_dir = peer::default_run_dir("launch").string();
    peer::RunDirectory run(c.run_dir, -1);

    // The monitor: bound before the peers start so that they can be told where it is.
    std::unique_ptr<peer::ConsensusMonitor> monitor;
    std::unique_ptr<transport::SnapshotReceiver> receiver;
    if (!*no_monitor && c.monitor.empty() && static_cast<int>(local.size()) == n) {
      monitor = std::make_unique<peer::ConsensusMonitor>(c.hidden, c.data_dir, n,
                                                         run.path() / "monitor.jsonl");
      const std::string bind = "tcp://127.0.0.1:*";
      receiver = std::make_unique<transport::SnapshotReceiver>(
          bind, gossip::monitor_curve(schedule, peer::security(c), bind));
      c.monitor = receiver->endpoint();
    }
    nlohmann::json recorded = c;
    recorded["command"] = "launch";
    recorded["peers"] = n;
    run.write_json("config.json", recorded);

    std::vector<ChildSpec> children;
    for (int r : local) {
      std::vector<std::string> args = {"peer", "--rank", std::to_string(r)};
      const auto flags = training_arguments(c);
      args.insert(args.end(), flags.begin(), flags.end());
      children.push_back({r, args, run.path() / fmt::format("peer-{}.log", r)});
    }
    spdlog::info("starting ranks {} of {} ({}), results in {}", fmt::join(local, ","), n, c.algo,
                 run.path());
    LocalProcesses processes(children);
    // Threads start after LocalProcesses has blocked SIGINT/SIGTERM, so they inherit the mask and
    // the signals reach the launcher's wait(), which forwards them to the peers.
    std::atomic<bool> stop_monitor{false};
    std::thread monitor_thread;
    if (monitor) {
      monitor_thread = std::thread([&] { peer::serve_monitor(*monitor, *receiver, stop_monitor); });
    }
    std::optional<ChildFailure> failure;
    {
      PeriodicTask progress(std::chrono::seconds(10),
                            [&] { log_combined_progress(run.path(), local); });
      failure = processes.wait();
    }
    stop_monitor.store(true);
    if (monitor_thread.joinable()) monitor_thread.join();
    if (monitor) run.write_json("monitor-summary.json", monitor->summary());

    if (processes.interrupted()) {
      throw IoError(
          fmt::format("interrupted by signal {}: every peer was stopped; results so "
                      "far in {} (resume with --resume if checkpoints were on)",
                      processes.interrupted(), run.path()));
    }
    if (failure) {
      throw IoError(fmt::format("{}\nthe other peers were stopped; logs in {}", failure->describe(),
                                run.path()));
    }
    const auto summary = peer::merge_run_summary(run.path(), n);
    run.write_json("summary.json", summary);
    if (summary.contains("final_average_model_accuracy")) {
      spdlog::info("average model: test accuracy {:.2f}%, relative consensus error {:.3e}",
                   100.0 * summary["final_average_model_accuracy"].get<double>(),
                   summary["final_consensus_error"].get<double>());
    }
    if (summary.contains("mean_peer_accuracy")) {
      spdlog::info("peers: mean test accuracy {:.2f}%, median iteration {:.2f} ms",
                   100.0 * summary["mean_peer_accuracy"].get<double>(),
                   summary["median_iteration_ms"].get<double>());
    }
    spdlog::info("results in {}", run.path());
  });
}

}  // namespace sgp::cli
