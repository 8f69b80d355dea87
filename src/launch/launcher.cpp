#include "sgp/launch/launcher.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <set>
#include <thread>

#include <fmt/ranges.h>
#include <fmt/std.h>
#include <spdlog/spdlog.h>

#include "sgp/config/algorithm.hpp"
#include "sgp/config/engine_settings.hpp"
#include "sgp/config/settings.hpp"
#include "sgp/data/dataset.hpp"
#include "sgp/endpoint.hpp"
#include "sgp/error.hpp"
#include "sgp/gossip/neighbour_watch.hpp"
#include "sgp/gossip/zmq_peer.hpp"
#include "sgp/launch/child_credentials.hpp"
#include "sgp/launch/emulated_hosts.hpp"
#include "sgp/launch/local_processes.hpp"
#include "sgp/launch/periodic_task.hpp"
#include "sgp/launch/picked_ports.hpp"
#include "sgp/launch/program_ranks.hpp"
#include "sgp/launch/refused_run.hpp"
#include "sgp/launch/run_summary.hpp"
#include "sgp/monitor/run_monitor.hpp"
#include "sgp/peer/peer_runner.hpp"
#include "sgp/peer/resume_settings.hpp"
#include "sgp/run/file_names.hpp"
#include "sgp/run/run_config.hpp"
#include "sgp/run/run_directory.hpp"
#include "sgp/run/run_files.hpp"
#include "sgp/topology/dot_file.hpp"
#include "sgp/topology/generator.hpp"
#include "sgp/topology/schedule.hpp"

namespace sgp::launch {

namespace {

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

// One line with each local peer's latest iteration and loss (every few seconds while they run).
void log_combined_progress(const std::filesystem::path& dir, const std::vector<int>& ranks) {
  std::vector<std::string> parts;
  for (int r : ranks) {
    std::ifstream log(dir / run::peer_log_file(r));
    std::string line, last;  // the last training record (evaluations have no loss)
    while (std::getline(log, line))
      if (line.find("\"loss\"") != std::string::npos) last = line;
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

std::vector<int> ranks_to_start(const LaunchOptions& o, const topology::Schedule& schedule) {
  const int n = schedule.num_peers();
  const std::vector<int> ranks = o.ranks.empty() ? ranks_on_this_host(schedule) : o.ranks;
  for (int r : ranks) {
    if (r < 0 || r >= n) {
      throw InputError(
          fmt::format("--ranks: {} is not a rank of {} (0..{})", r, o.config.topology, n - 1));
    }
  }
  if (ranks.empty()) {
    throw InputError(
        fmt::format("{}: no endpoint is on this host; give --ranks", o.config.topology));
  }
  return ranks;
}

// The run's monitor (monitor::RunMonitor) on its own thread, for runs whose peers are all on
// this host.
class LocalMonitor {
 public:
  // `bind`: tcp://ADDRESS:* on an address every peer reaches. `consensus_only`: the peers' model
  // is not sgp's (sgp launch -- COMMAND), and their evaluation points are their own. `plain`:
  // the run's credentials, for a keyless run (ChildCredentials).
  LocalMonitor(const config::TrainConfig& c, const topology::Schedule& schedule,
               const std::filesystem::path& run_dir, const std::string& bind, bool consensus_only,
               const std::optional<transport::PlainServer>& plain)
      : monitor_(c, schedule, config::security(c), run_dir, bind, consensus_only, plain) {
    if (!consensus_only) until_iteration_ = monitor_.accept_run_evaluations().total;
  }
  std::string endpoint() const { return monitor_.endpoint(); }
  // Its thread, like the ZAP handler's, inherits the mask of launch_peers' HeldSignals.
  void start() {
    thread_ = std::thread([this] { monitor_.serve(stop_, until_iteration_); });
  }
  run::MonitorSummary stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
    return monitor_.finish();
  }
  ~LocalMonitor() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }

 private:
  monitor::RunMonitor monitor_;
  // The last evaluation point: its record done, the monitor stops without draining (the drain
  // waits for a second of silence, which every run's end took before).
  std::int64_t until_iteration_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// --link-rate: every rank on its own emulated host. The topology is readdressed onto the hosts
// (run_dir/topology-emulated.dot, which the peers then read) and each peer is started inside its
// host's namespace with `ip netns exec`.
class Emulation {
 public:
  Emulation(config::TrainConfig& c, const config::LinkRate& rate, const std::vector<int>& local,
            int n, const std::filesystem::path& run_dir)
      : hosts_(fmt::format("sgpe{}", ::getpid()), n, rate) {
    if (static_cast<int>(local.size()) != n) {
      throw InputError(
          "--link-rate: sgp launch emulates every host of the run on this machine, so it starts "
          "every rank (leave --ranks out)");
    }
    topology::Schedule schedule = peer::load_topology(c);
    std::vector<std::string> endpoints;
    for (int r = 0; r < n; ++r)
      endpoints.push_back(fmt::format("tcp://{}:{}", hosts_.address(r), kPort));
    schedule.set_endpoints(std::move(endpoints));
    const auto file = run_dir / "topology-emulated.dot";
    topology::write_dot_file(
        schedule, file, fmt::format("{} on emulated hosts, egress {}", c.topology, c.link_rate));
    c.topology = file.string();
    // The hosts' network is reachable from this machine only, as loopback is: without keys,
    // plain TCP on it is no more exposed than the loopback run it stands for.
    if (!schedule.has_public_keys()) c.insecure = true;
  }
  std::string monitor_bind() const { return fmt::format("tcp://{}:*", hosts_.bridge_address()); }
  // `sgp peer ARGS` inside rank r's host: ip netns exec NAME /proc/<launcher>/exe ARGS.
  std::vector<std::string> command(int r, std::vector<std::string> args) const {
    std::vector<std::string> words = {"netns", "exec", hosts_.namespace_name(r),
                                      fmt::format("/proc/{}/exe", ::getpid())};
    words.insert(words.end(), args.begin(), args.end());
    return words;
  }

 private:
  static constexpr int kPort = 29500;  // each host has its own ports
  EmulatedHosts hosts_;
};

}  // namespace

std::vector<int> ranks_on_this_host(const topology::Schedule& schedule) {
  const auto names = local_host_names();
  std::vector<int> ranks;
  for (int r = 0; r < schedule.num_peers(); ++r) {
    const auto endpoint = Endpoint::parse(schedule.endpoint(r), "the topology");
    if (names.count(endpoint.host) || endpoint.is_loopback()) ranks.push_back(r);
  }
  return ranks;
}

namespace {

// What every peer would refuse at its start, refused once before any starts (exit 2): a
// topology the algorithm cannot mix on, a data directory that is not there.
// Returns the schedule the peers will mix with.
// A program (sgp launch -- COMMAND) reads its own data: only `sgp peer` needs the data directory.
topology::Schedule check_before_start(const config::TrainConfig& c,
                                      const topology::Schedule& schedule, bool needs_data = true) {
  const std::optional<double> self_weight =
      c.self_weight > 0.0 ? std::optional<double>(c.self_weight) : std::nullopt;
  auto mixing = config::mixing_schedule(c.algo, schedule, self_weight, c.topology);
  for (int rank = 0; rank < mixing.num_peers(); ++rank)
    gossip::check_robust(mixing, rank, c.robust);
  if (!needs_data) return mixing;
  const auto data = data::resolve_data_dir(c.data_dir);
  if (!std::filesystem::is_directory(data)) {
    throw InputError(fmt::format(
        "data directory {} does not exist (give --data-dir, set $SGP_DATA_DIR, or install the "
        "Debian package dataset-fashion-mnist)",
        data.string()));
  }
  return mixing;
}

// The run directory is self-contained: the topology as the peers mix on it (the file's graph
// and endpoints with the weights actually used) goes next to config.json.
// `monitor_endpoint`: the monitor this launch started, for ranks restarted by hand.
void write_run_files(const run::RunDirectory& run, const config::TrainConfig& c, int n,
                     const topology::Schedule& mixing, const std::string& monitor_endpoint = {}) {
  run::write_run_config(run, c, "launch", n, &mixing, monitor_endpoint);
  run::write_file_atomically(
      run.path() / run::kMixingTopologyFile,
      topology::to_dot(mixing, fmt::format("the topology of this run as mixed: {} (--algo {}, "
                                           "--self-weight {})",
                                           c.topology, name_of(c.algo), c.self_weight)));
}

// --base-port: every rank keeps its host and listens on base_port + the number of lower ranks
// there. The schedule in memory is readdressed at once (what this host starts depends on it).
void readdress_ports(topology::Schedule& schedule, std::optional<int> base_port) {
  if (base_port)
    schedule.set_endpoints(topology::readdress_ports(schedule.endpoints(), *base_port));
}

// ... and, once the run directory is claimed, written there for the peers to read (with the ports
// this launch picked, if it did): <run-dir>/topology-readdressed.dot becomes the run's --topology
// (config.json says so).
void write_readdressed(config::TrainConfig& c, const topology::Schedule& schedule,
                       std::optional<int> base_port, bool picked,
                       const std::filesystem::path& run_dir) {
  if (!base_port && !picked) return;
  const auto file = run_dir / "topology-readdressed.dot";
  const std::string how = picked ? "with free ports this launch picked for its ranks"
                                 : fmt::format("with its ports numbered from {}", *base_port);
  run::write_file_atomically(file, topology::to_dot(schedule, c.topology + " " + how));
  c.topology = file.string();
}

// Stops the monitor and writes its results. When a peer failed, that failure is what the run
// reports: the monitor failing to write too (the same full disk) is logged, not thrown over it.
void finish_monitor(LocalMonitor* monitor, const run::RunDirectory& run, bool program,
                    bool peers_failed) {
  if (!monitor) return;
  try {
    auto summary = monitor->stop();
    if (program) add_program_evaluation(summary, run.path());
    run.write_json(run::kMonitorSummaryFile, summary);
  } catch (const IoError& e) {
    if (!peers_failed) throw;
    spdlog::warn("monitor: {}", e.what());
  }
}

// A keyed run says so once, as a keyless one says what protects it (ChildCredentials).
void log_curve(const config::TrainConfig& c, const topology::Schedule& schedule) {
  if (!schedule.has_public_keys()) return;
  spdlog::info(
      "CURVE: every connection between the peers and to the monitor is authenticated and "
      "encrypted with the topology's public keys and the secret keys in {}",
      c.keys_dir);
}

// One `sgp peer --config <run-dir>/config.json --rank R` per local rank.
std::vector<ChildSpec> peer_children(const std::filesystem::path& run_dir,
                                     const std::vector<int>& local,
                                     const std::string& monitor_endpoint,
                                     const Emulation* emulation,
                                     const ChildCredentials* credentials) {
  std::vector<ChildSpec> children;
  const auto config_file = (run_dir / run::kRunConfigFile).string();
  for (int r : local) {
    std::vector<std::string> args = {"peer", "--config", config_file, "--rank", std::to_string(r)};
    if (!monitor_endpoint.empty()) args.insert(args.end(), {"--monitor", monitor_endpoint});
    if (credentials) std::ranges::copy(credentials->arguments(r), std::back_inserter(args));
    children.push_back({r, emulation ? emulation->command(r, std::move(args)) : std::move(args),
                        run_dir / run::peer_output_file(r)});
  }
  return children;
}

// sgp launch -- COMMAND ARGS: the program once per local rank, told its rank and the run's
// settings in its environment.
std::vector<ChildSpec> program_children(const LaunchOptions& o,
                                        const std::filesystem::path& run_dir,
                                        const std::vector<int>& local, int n,
                                        const std::string& monitor_endpoint,
                                        const ChildCredentials* credentials) {
  std::vector<ChildSpec> children;
  for (std::size_t i = 0; i < local.size(); ++i) {
    const int r = local[i];
    children.push_back(
        {r, std::vector<std::string>(o.command.begin() + 1, o.command.end()),
         run_dir / run::peer_output_file(r),
         program_environment(o.config, run_dir, r, n, static_cast<int>(i), monitor_endpoint)});
    if (credentials) {
      children.back().env.push_back("SGP_RUN_CREDENTIALS=" + credentials->file(r).string());
    }
  }
  return children;
}

}  // namespace

std::filesystem::path prepare_run(config::TrainConfig config, std::optional<int> base_port) {
  config::validate(config);
  auto schedule = peer::load_topology(config);
  readdress_ports(schedule, base_port);
  PickedPorts().pick(schedule, {});  // InputError for port 0: nobody here starts the peers
  const auto mixing = check_before_start(config, schedule);
  const int n = schedule.num_peers();
  if (config.run_dir.empty()) config.run_dir = run::create_default_run_dir("launch").string();
  run::RunDirectory run(config.run_dir, -1);
  run.claim({run::run_start_of(config), {}});  // the whole run, as a launcher of every rank
  write_readdressed(config, schedule, base_port, false, run.path());
  write_run_files(run, config, n, mixing);
  spdlog::info("wrote {} for {} peers", run.path() / run::kRunConfigFile, n);
  return run.path();
}

namespace {

// Whether the run goes on when a peer fails: asked for, or asgp's default (a fault-tolerant
// algorithm), rather than stopping the other peers.
bool goes_on_after_failure(const config::TrainConfig& c) {
  return c.on_peer_failure == config::PeerFailure::go_on ||
         (c.on_peer_failure == config::PeerFailure::automatic &&
          config::info(c.algo).tolerates_failures);
}

// Waits for the local peers, logging their combined progress every 10 s: until every one has
// ended when the run goes on after a failure, else until they all finished or the first failed.
std::vector<ChildFailure> wait_for_peers(LocalProcesses& processes,
                                         const std::filesystem::path& run_dir,
                                         const std::vector<int>& local, bool go_on) {
  PeriodicTask progress(std::chrono::seconds(10), [&] { log_combined_progress(run_dir, local); });
  if (go_on) return processes.wait_for_all();
  if (auto failure = processes.wait()) return {*failure};
  return {};
}

// The run's outcome once its peers have ended: Interrupted, or IoError when a peer failed and
// the run could not go on without it; else the summary of this host's ranks.
run::RunSummary conclude_run(const LocalProcesses& processes,
                             const std::vector<ChildFailure>& failures, bool go_on,
                             const std::vector<int>& local, const std::filesystem::path& run_dir) {
  if (processes.interrupted()) {
    throw Interrupted(
        processes.interrupted(),
        fmt::format("interrupted by signal {}: every peer was stopped; results so far in {} "
                    "(continue with sgp launch --run-dir {} --resume if checkpoints were on)",
                    processes.interrupted(), run_dir, run_dir));
  }
  if (!failures.empty() && (!go_on || failures.size() == local.size())) {
    throw IoError(fmt::format("{}\n{}; logs in {}", failures.front().describe(),
                              go_on ? "no peer finished" : "the other peers were stopped",
                              run_dir));
  }
  std::vector<int> failed;
  for (const auto& f : failures) failed.push_back(f.rank);
  auto summary = summarize_launch(run_dir, local, failed);
  check_suspects(summary, run_dir);
  return summary;
}

// launch_peers with SIGINT/SIGTERM held (see there).
run::RunSummary launch_held(LaunchOptions o) {
  config::TrainConfig& c = o.config;
  config::validate(c);
  topology::Schedule schedule = peer::load_topology(c);
  readdress_ports(schedule, o.base_port);
  const int n = schedule.num_peers();
  const std::vector<int> local = ranks_to_start(o, schedule);
  const config::LinkRate link_rate = config::parse_link_rate(c.link_rate);
  PickedPorts picked;
  if (!link_rate.emulated) picked.pick(schedule, local);  // emulated hosts have their own ports
  const auto mixing = check_before_start(c, schedule, o.command.empty());
  const std::filesystem::path program =
      o.command.empty() ? std::filesystem::path() : find_program(o.command.front());
  if (c.run_dir.empty()) c.run_dir = run::create_default_run_dir("launch").string();
  run::RunDirectory run(c.run_dir, -1);
  if (c.resume && run::ranks_finished(run.path(), local) &&
      !peer::extends_finished_run(run.path(), local, c)) {
    spdlog::info(
        "--resume: the run in {} is finished (every peer here wrote its summary); "
        "nothing to do",
        run.path());
    return run::merge_run_summary(run.path(), n);
  }
  // A launcher of every rank answers for the whole directory; one of several (a host's ranks)
  // for its own ranks' files.
  const std::vector<int> scope = static_cast<int>(local.size()) == n ? std::vector<int>{} : local;
  run.claim({run::run_start_of(c), scope});
  // Declared before everything that writes: it runs after their clean-up.
  RefusedRunCleanup refused(run.path(), scope, run::run_start_of(c) == run::RunStart::fresh);
  write_readdressed(c, schedule, o.base_port, picked.any(), run.path());

  std::unique_ptr<Emulation> emulation;
  if (link_rate.emulated && !o.command.empty())
    throw InputError("--link-rate: emulated hosts run sgp's own peers only, not -- COMMAND");
  if (link_rate.emulated)
    emulation = std::make_unique<Emulation>(c, link_rate, local, n, run.path());

  const bool own_monitor =
      !o.no_monitor && c.monitor.empty() && static_cast<int>(local.size()) == n;
  // After the emulation, which turns keyless runs --insecure.
  std::unique_ptr<ChildCredentials> credentials;
  if (wants_run_credentials(c, schedule, local.size()))
    credentials = std::make_unique<ChildCredentials>(run.path(), n, own_monitor);
  log_curve(c, schedule);
  // Bound before the peers start, so that they can be told where it is: on their command line,
  // not as config.json's setting, which a resume takes up again (this port will be gone by
  // then); config.json records it apart, for a rank restarted by hand (sgp peer --join).
  std::unique_ptr<LocalMonitor> monitor;
  if (own_monitor) {
    monitor = std::make_unique<LocalMonitor>(
        c, schedule, run.path(), emulation ? emulation->monitor_bind() : "tcp://127.0.0.1:*",
        !o.command.empty(), credentials ? std::optional(credentials->monitor()) : std::nullopt);
  }
  const std::string monitor_endpoint = monitor ? monitor->endpoint() : std::string();
  write_run_files(run, c, n, mixing, monitor_endpoint);

  std::vector<ChildSpec> children =
      o.command.empty()
          ? peer_children(run.path(), local, monitor_endpoint, emulation.get(), credentials.get())
          : program_children(o, run.path(), local, n, monitor_endpoint, credentials.get());
  for (ChildSpec& child : children) picked.hand_to(child);
  spdlog::info("starting ranks {} of {} ({}{}), results in {}", fmt::join(local, ","), n,
               name_of(c.algo), o.command.empty() ? "" : ", " + o.command.front(), run.path());
  LocalProcesses processes(children, !program.empty() ? program
                                     : emulation      ? std::filesystem::path(ip_program())
                                                      : self_executable());
  picked.release();
  if (monitor) monitor->start();
  const bool go_on = goes_on_after_failure(c);
  const auto failures = wait_for_peers(processes, run.path(), local, go_on);
  finish_monitor(monitor.get(), run, !o.command.empty(), !failures.empty());
  // A peer stopped while it wrote a file (SIGTERM after another failed) leaves its temporary file.
  run::remove_temporary_files(run.path(), scope);
  return conclude_run(processes, failures, go_on, local, run.path());
}

}  // namespace

run::RunSummary launch_peers(LaunchOptions o) {
  // Ctrl-C at any moment ends in Interrupted (exit 130) after the clean-up (the credentials, the
  // temporary files): SIGINT/SIGTERM are held from here on, by every thread started below too (a
  // handler thread left to take one would die of it, and the process with it). One that comes
  // before the peers start is taken by LocalProcesses, which then starts none; one after they
  // stopped, here.
  HeldSignals held;
  auto summary = launch_held(std::move(o));
  if (const int sig = held.take_pending()) {
    throw Interrupted(sig, fmt::format("interrupted by signal {} as the run ended: every peer had "
                                       "stopped and the results are written",
                                       sig));
  }
  return summary;
}

}  // namespace sgp::launch
