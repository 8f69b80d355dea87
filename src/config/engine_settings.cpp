#include "sgp/config/engine_settings.hpp"

#include <chrono>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "sgp/config/algorithm.hpp"
#include "sgp/endpoint.hpp"
#include "sgp/error.hpp"
#include "sgp/gossip/run_credentials.hpp"
#include "sgp/named_values.hpp"
#include "sgp/topology/schedule.hpp"

namespace sgp::config {

gossip::Security security(const TrainConfig& config) {
  gossip::Security s{config.keys_dir, config.insecure, std::nullopt};
  if (!config.run_credentials.empty())
    s.credentials = gossip::read_run_credentials(config.run_credentials);
  return s;
}

bool overlap_comm_thread(const TrainConfig& config, const topology::Schedule& s, int rank) {
  if (config.comm_thread != "auto") return config.comm_thread == "on";
  if (!s.has_endpoints()) return true;
  const auto host = [&](int r) {
    const auto e = Endpoint::parse(s.endpoint(r), "the topology");
    return e.is_loopback() ? std::string("loopback") : e.host;
  };
  int here = 0;
  for (int r = 0; r < s.num_peers(); ++r) here += host(r) == host(rank);
  const bool threaded = static_cast<int>(std::thread::hardware_concurrency()) > here;
  if (info(config.algo).mode == gossip::Mode::overlap && !threaded) {
    spdlog::info(
        "rank {}: {} peers on this host, {} cores: {} communicates between steps "
        "(--comm-thread on to use a thread)",
        rank, here, std::thread::hardware_concurrency(), name_of(config.algo));
  }
  return threaded;
}

void require_compression_applies(const TrainConfig& c, std::optional<bool> on_cpu) {
  if (c.compress == gossip::Compression::none) return;
  const AlgorithmInfo& row = info(c.algo);
  if (!row.compressible && row.tracks_gradient && row.mode == gossip::Mode::overlap) {
    throw InputError(fmt::format(
        "--compress {}: {} sends its rounds of [x; y] in float32 only (16-bit rounds of the "
        "overlapped tracker are not built); use --compress none, or --algo gt to compress",
        gossip::name_of(c.compress), name_of(c.algo)));
  }
  if (!row.compressible) {
    throw InputError(fmt::format(
        "--compress {}: {} does not send push-sum rounds of float32 x (allreduce keeps float32 so "
        "its average stays exact; asgp pushes mass it keeps until acknowledged); use --compress "
        "none",
        gossip::name_of(c.compress), name_of(c.algo)));
  }
  if (c.compress.compressor && (info(c.algo).tracks_gradient || c.global_average_every > 0)) {
    throw InputError(fmt::format(
        "--compress {}: compressed gossip is built for push-sum rounds of x alone, not {}; use "
        "--compress none, fp16 or bf16",
        gossip::name_of(c.compress),
        c.global_average_every > 0 ? "--global-average-every" : "gradient tracking"));
  }
  if (on_cpu == false) {
    throw InputError(fmt::format(
        "--compress {}: payloads are compressed on the CPU backend only; with --device {} use "
        "--compress none (or --device cpu)",
        gossip::name_of(c.compress), c.device));
  }
}

gossip::PushSumConfig push_sum_config(const TrainConfig& config, int rank,
                                      compute::DeviceKind device, bool comm_thread) {
  gossip::PushSumConfig gc;
  gc.mode = info(config.algo).mode;
  gc.tau = config.tau;
  gc.comm_thread = comm_thread;
  gc.gossip_every = config.gossip_every;
  gc.timeout = std::chrono::milliseconds(config.timeout_ms);
  gc.running_sums = config.running_sums;
  gc.acked_pushes = config.acked_pushes;
  gc.partner_wait = config.partner_wait;
  gc.fail_stop = info(config.algo).tracks_gradient;
  gc.compression = config.compress.format;
  gc.compressor = config.compress.compressor;
  gc.consensus_step = config.consensus_step;
  // Every peer starts from net.initial_parameters(seed), the same seed: one x0 for all.
  gc.copies_start_at_x = true;
  gc.robust = config.robust;
  gc.sign_flip = config.sign_flip_rank == rank;
  gc.global_average_every = config.global_average_every;
  if ((gc.robust != gossip::Robust::none || gc.sign_flip) && device != compute::DeviceKind::cpu) {
    throw InputError(fmt::format(
        "--{}: models are measured on the CPU backend only; with --device {} use --device cpu",
        gc.sign_flip ? "sign-flip-rank" : "robust", config.device));
  }
  if (gc.sign_flip) {
    spdlog::warn(
        "rank {}: --sign-flip-rank: this rank pushes its parameters sign-flipped (an attack "
        "simulation)",
        rank);
  }
  require_compression_applies(config, device == compute::DeviceKind::cpu);
  return gc;
}

}  // namespace sgp::config
