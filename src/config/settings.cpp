#include "sgp/config/settings.hpp"

#include <algorithm>
#include <array>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "sgp/config/engine_settings.hpp"
#include "sgp/config/link_rate.hpp"
#include "sgp/config/setting_types.hpp"
#include "sgp/config/straggler.hpp"
#include "sgp/data/partition.hpp"
#include "sgp/endpoint.hpp"
#include "sgp/model/model_spec.hpp"
#include "sgp/transport/faulty_transport.hpp"

namespace sgp::config {

namespace detail {

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

std::string Range::bounds() const {
  const bool low = std::isfinite(min), high = std::isfinite(max);
  if (low && high) {
    return fmt::format("in {}{}, {}{}", min_open ? "(" : "[", shortest(min), shortest(max),
                       max_open ? ")" : "]");
  }
  if (low) return fmt::format("{} {}", min_open ? ">" : ">=", shortest(min));
  if (high) return fmt::format("{} {}", max_open ? "<" : "<=", shortest(max));
  return {};
}

std::string Range::describe(bool integer) const {
  const std::string noun = integer ? "an integer" : "a number";
  const std::string b = bounds();
  return b.empty() ? noun : noun + " " + b;
}

}  // namespace detail

namespace {

using detail::above;
using detail::at_least;
using detail::between;
using detail::Range;
using detail::TypedSetting;
using S = SettingScope;

constexpr std::string_view kModel = "Model and data";
constexpr std::string_view kOptim = "Optimisation";
constexpr std::string_view kCompute = "Compute";
constexpr std::string_view kPeers = "Peers and gossip";
constexpr std::string_view kReport = "Reporting";

std::string check_device(const std::string& device) {
  if (device == "auto" || device == "cpu" || device == "cuda") return {};
  if (device.starts_with("cuda:") && device.size() > 5 &&
      device.find_first_not_of("0123456789", 5) == std::string::npos) {
    return {};
  }
  return fmt::format("'{}' is not a device (expected auto, cpu, cuda or cuda:<index>)", device);
}

// Parsers throw InputError saying why; a setting's check returns it.
template <class Parse>
std::string parse_problem(const std::string& text, Parse parse) {
  try {
    parse(text);
  } catch (const InputError& e) {
    return e.what();
  }
  return {};
}
std::string check_model(const std::string& m) { return parse_problem(m, model::parse_model_spec); }
std::string check_partition(const std::string& p) {
  return parse_problem(p, data::parse_partition_spec);
}

// `hidden` (widths of the MLP) is what model was before it could name a CNN: old config.json
// and sweep files still say hidden = [512, 512]. Read into model = "mlp:512,512", never written.
class HiddenWidthsAlias final : public Setting {
 public:
  HiddenWidthsAlias()
      : Setting("hidden", kModel, "the same as --model mlp:W1,W2,...", SettingScope::every_run,
                true) {}
  std::string value_hint() const override { return "INT,... (each in [1, 65536])"; }
  // The widths when the model is an MLP ("" otherwise): shown as --hidden's default.
  nlohmann::json get(const TrainConfig& c) const override { return text(c); }
  std::string text(const TrainConfig& c) const override {
    return c.model.starts_with("mlp:") ? c.model.substr(4) : std::string();
  }
  void set(TrainConfig& c, const nlohmann::json& value) const override {
    store(c, detail::Codec<std::vector<int>>::from_json(value));
  }
  void parse(TrainConfig& c, std::string_view text) const override {
    store(c, detail::Codec<std::vector<int>>::from_text(text));
  }
  std::string problem(const TrainConfig&) const override { return {}; }

 private:
  static void store(TrainConfig& c, const std::vector<int>& widths) {
    for (int w : widths) {
      if (w < 1 || w > 65536)
        throw SettingError(fmt::format("expected an integer in [1, 65536], got {}", w));
    }
    c.model = model::mlp_spec(widths).text;
  }
};

}  // namespace

std::span<const NamedValue<PeerFailure>> names(PeerFailure) {
  static constexpr std::array<NamedValue<PeerFailure>, 3> table = {{
      {PeerFailure::automatic, "auto", "continue for asgp, stop for the others"},
      {PeerFailure::go_on, "continue", "the other peers go on without the dead one"},
      {PeerFailure::stop, "stop", "stop every peer"},
  }};
  return table;
}

std::span<const NamedValue<Work>> names(Work) {
  static constexpr std::array<NamedValue<Work>, 2> table = {{
      {Work::per_peer, "per-peer", "every peer trains the same number of iterations"},
      {Work::budget, "budget",
       "epochs x the training set's samples over all peers together: fast peers take more "
       "(asgp, agt)"},
  }};
  return table;
}

std::span<const NamedValue<MomentumKind>> names(MomentumKind) {
  static constexpr std::array<NamedValue<MomentumKind>, 2> table = {{
      {MomentumKind::local, "local", "the buffer follows the local stochastic gradient"},
      {MomentumKind::quasi_global, "quasi-global",
       "the buffer follows the change of the de-biased mixed model (Lin et al. 2021)"},
  }};
  return table;
}

namespace {

std::string check_inject(const std::string& spec) {
  return parse_problem(spec, transport::parse_fault_spec);
}

std::string check_comm_thread(const std::string& value) {
  if (value == "auto" || value == "on" || value == "off") return {};
  return fmt::format("'{}' is not one of auto, on, off", value);
}

std::string check_link_rate(const std::string& rate) {
  return parse_problem(rate, parse_link_rate);
}

std::string check_straggler(const std::string& spec) {
  return parse_problem(spec, parse_straggler_spec);
}

std::string check_milestones(const std::vector<double>& epochs) {
  if (!std::is_sorted(epochs.begin(), epochs.end())) {
    return fmt::format("milestones must be in increasing order, got {}", fmt::join(epochs, ","));
  }
  return {};
}

std::string check_self_weight(const double& a) {
  return a == 0.0 || (a > 0.0 && a < 1.0)
             ? std::string()
             : fmt::format(
                   "expected a mixing rate in (0, 1), or 0 for the topology's own "
                   "weights; got {}",
                   a);
}

template <class T, class... Rest>
Setting& add(std::vector<std::unique_ptr<Setting>>& rows, Rest&&... rest) {
  rows.push_back(std::make_unique<TypedSetting<T>>(std::forward<Rest>(rest)...));
  return *rows.back();
}

// The table, one function per group. Ranges are what the code handles; anything outside them
// is refused up front.
// What is trained, on what.
void add_model_rows(std::vector<std::unique_ptr<Setting>>& r) {
  using C = TrainConfig;
  add<std::string>(r, "model", kModel,
                   "mlp:W1,W2,... (ReLU MLP), lenet (LeNet-5 style CNN), lenet-wide, or "
                   "layers:L1,L2,... of linearN, relu, convCkK[sS][pP], maxpoolK[sS], "
                   "avgpoolK[sS], flatten; the classifier is appended",
                   S::every_run, true, &C::model, Range{}, check_model)
      .fix_across_resume();
  add<std::string>(r, "partition", kModel,
                   "how the training set is split across peers: iid, dirichlet:ALPHA (label skew, "
                   "small ALPHA = strong) or shards:K (K label-sorted shards per peer)",
                   S::every_run, true, &C::partition, Range{}, check_partition)
      .fix_across_resume();
  add<std::string>(r, "data_dir", kModel,
                   "directory with the Fashion-MNIST IDX files (default: $SGP_DATA_DIR, else "
                   "/usr/share/datasets/fashion-mnist from the Debian package)",
                   S::every_run, true, &C::data_dir);
  add<std::uint64_t>(r, "seed", kModel, "seed of the initialisation, shard split and batch order",
                     S::every_run, true, &C::seed)
      .fix_across_resume();
}

// The local SGD loop.
void add_optimiser_rows(std::vector<std::unique_ptr<Setting>>& r) {
  using C = TrainConfig;
  add<double>(r, "epochs", kOptim, "epochs over each peer's shard (may be fractional)",
              S::every_run, true, &C::epochs, Range{0, 1e4, true, false});
  add<std::int64_t>(r, "max_iterations", kOptim, "stop after this many iterations (0: no limit)",
                    S::every_run, true, &C::max_iterations, at_least(0));
  add<int>(r, "batch_size", kOptim, "mini-batch size per peer", S::every_run, true, &C::batch_size,
           between(1, 65536))
      .fix_across_resume();
  add<double>(r, "lr", kOptim,
              "base learning rate (for a global batch of 256 with --lr-scaling linear)",
              S::every_run, true, &C::lr, between(0, 1e3));
  add<model::LrScaling>(r, "lr_scaling", kOptim,
                        "none, or linear: lr * (batch * peers) / 256 (the large-batch rule)",
                        S::every_run, true, &C::lr_scaling);
  add<double>(r, "warmup_epochs", kOptim, "linear learning-rate warm-up, in epochs", S::every_run,
              true, &C::warmup_epochs, between(0, 1e4));
  add<model::LrDecay>(r, "lr_decay", kOptim, "constant, step (see --lr-milestones) or cosine",
                      S::every_run, true, &C::lr_decay);
  add<std::vector<double>>(
      r, "lr_milestones", kOptim, "epochs at which step decay multiplies the lr by --lr-gamma",
      S::every_run, true, &C::lr_milestones, between(0, 1e4), &check_milestones);
  add<double>(r, "lr_gamma", kOptim, "step-decay factor", S::every_run, true, &C::lr_gamma,
              between(0, 1e3));
  add<float>(r, "momentum", kOptim, "SGD momentum", S::every_run, true, &C::momentum,
             Range{0, 1, false, true});
  add<bool>(r, "nesterov", kOptim, "Nesterov momentum", S::every_run, true, &C::nesterov);
  add<float>(r, "weight_decay", kOptim, "L2 weight decay", S::every_run, true, &C::weight_decay,
             between(0, 1));
  add<MomentumKind>(r, "momentum_kind", kOptim,
                    "local (the buffer follows the stochastic gradient) or quasi-global (it "
                    "follows the change of the de-biased mixed model: Lin et al. 2021); "
                    "docs/optimizers.md",
                    S::every_run, true, &C::momentum_kind)
      .fix_across_resume();
}

// Where it runs.
void add_compute_rows(std::vector<std::unique_ptr<Setting>>& r) {
  using C = TrainConfig;
  add<std::string>(r, "device", kCompute,
                   "auto (GPU when usable, else CPU), cpu, cuda or cuda:<index>", S::every_run,
                   true, &C::device, Range{}, &check_device);
  add<int>(r, "blas_threads", kCompute, "OpenBLAS threads per process (CPU backend)", S::every_run,
           true, &C::blas_threads, between(1, 1024));
  add<bool>(r, "tf32", kCompute, "allow TF32 tensor-core math in cuBLAS GEMMs", S::every_run, true,
            &C::tf32);
}

// The peers and their gossip.
void add_peer_rows(std::vector<std::unique_ptr<Setting>>& r) {
  using C = TrainConfig;
  add<std::string>(r, "topology", kPeers,
                   "topology file (Graphviz DOT with an endpoint per node; see `sgp topology`)",
                   S::peers, false, &C::topology);
  add<Algorithm>(
      r, "algo", kPeers,
      "sgp (synchronous push-sum), osgp (overlapped, see --tau), asgp (asynchronous: "
      "nobody waits; survives failed, joining and leaving peers), local (no "
      "communication), dpsgd (symmetric gossip, undirected topology), exact (complete "
      "topology: exact averaging, for comparison), allreduce (ring AllReduce over "
      "ranks 0..N-1: the exact average every round, the baseline), gt (gradient "
      "tracking over synchronous push-sum), ogt (the same over osgp's engine), agt (gradient "
      "tracking over asgp's engine)",
      S::peers, true, &C::algo)
      .fix_across_resume();
  add<gossip::PayloadCompression>(
      r, "compress", kPeers,
      "push-sum payloads as float32 (none) or rounded to fp16 / bf16 (half the bytes; the "
      "sender keeps what rounding took off, so the sum of x is conserved); or compressed "
      "differences to public copies with error feedback (topk:R, randk:R, sign, qsgd:L; "
      "docs/compression.md); sgp, osgp, dpsgd, exact on the CPU",
      S::peers, true, &C::compress);
  add<double>(r, "consensus_step", kPeers,
              "--compress topk|randk|sign|qsgd: the consensus step gamma; 0: the compressor's "
              "default (R for topk and randk, 0.005 for sign, 1 / (1 + omega) for qsgd)",
              S::peers, true, &C::consensus_step, between(0, 1));
  add<gossip::Robust>(
      r, "robust", kPeers,
      "defence against an in-neighbour pushing poisoned models: none (suspects are still named "
      "in the log and the summary) or clip (ClippedGossip: each in-neighbour's model is clipped "
      "to an adaptive radius around one's own; sgp and dpsgd on the CPU, float32 payloads)",
      S::peers, true, &C::robust);
  add<int>(r, "tau", kPeers, "osgp, ogt: how many rounds an in-neighbour may lag behind", S::peers,
           true, &C::tau, between(0, 100));
  add<std::string>(
      r, "comm_thread", kPeers,
      "osgp, ogt: communicate on a thread of its own (on), on the training thread "
      "between steps (off), or auto: off when this host has no more cores than "
      "peers (4 peers on 2 cores: off took up to 7% less time per iteration, never more)",
      S::peers, true, &C::comm_thread, Range{}, check_comm_thread);
  add<int>(r, "gossip_every", kPeers, "gossip once every H iterations", S::peers, true,
           &C::gossip_every, between(1, 1000000))
      .fix_across_resume();
  add<int>(r, "global_average_every", kPeers,
           "Gossip-PGA: every H iterations the round is the ring allreduce's exact average "
           "instead of gossip (0: never; sgp, dpsgd, exact with --gossip-every 1)",
           S::peers, true, &C::global_average_every, between(0, 1000000))
      .fix_across_resume();
  add<double>(r, "slow_momentum", kPeers,
              "SlowMo: outer momentum at each exact average of --global-average-every (0: off)",
              S::peers, true, &C::slow_momentum, Range{0, 1, false, true})
      .fix_across_resume();
  add<double>(r, "self_weight", kPeers,
              "mixing rate a in (0, 1): keep a, push (1 - a) spread over the out-neighbours "
              "(overrides the file's weights; 0 = use the file)",
              S::peers, true, &C::self_weight, Range{}, &check_self_weight)
      .fix_across_resume();
  add<int>(r, "timeout_ms", kPeers,
           "a neighbour's message missing this long fails the run, naming the neighbour (asgp: "
           "the neighbour is excluded, at most this long after its last message)",
           S::peers, true, &C::timeout_ms, between(1, 86400000));
  add<std::int64_t>(r, "checkpoint_every", kPeers,
                    "write a checkpoint every C iterations into <run-dir>/checkpoints (0: never)",
                    S::peers, true, &C::checkpoint_every, at_least(0));
  add<bool>(r, "resume", kPeers, "continue from the newest checkpoint that every peer finished",
            S::peers, false, &C::resume);
}

// Where a peer connects and how: the monitor, keys, the transport, emulated links.
void add_connection_rows(std::vector<std::unique_ptr<Setting>>& r) {
  using C = TrainConfig;
  add<std::string>(r, "monitor", kPeers,
                   "endpoint of the consensus monitor to hand snapshots to (best effort)", S::peers,
                   false, &C::monitor);
  add<std::string>(r, "keys", kPeers,
                   "directory with this process's CURVE secret key (`sgp keygen`); needed when "
                   "the topology has public keys",
                   S::peers, true, &C::keys_dir);
  add<bool>(r, "insecure", kPeers,
            "without keys: run unauthenticated as sgp did before: no per-run passwords for a run "
            "whose every peer is on this host (any local process can then send gossip and "
            "monitor snapshots), and endpoints other than loopback allowed (unencrypted: anyone "
            "who can reach a port can pose as a peer)",
            S::peers, true, &C::insecure);
  add<bool>(r, "local_ipc", kPeers,
            "peers on one host exchange over ipc:// (Unix sockets) instead of TCP loopback "
            "(--no-local-ipc: TCP everywhere)",
            S::peers, true, &C::local_ipc);
  add<bool>(r, "local_fast_path", kPeers,
            "payloads to peers on this host go through shared-memory rings instead of the "
            "kernel (off: over ZeroMQ like the rest, for comparison)",
            S::peers, true, &C::local_fast_path);
  add<std::string>(r, "link_rate", kPeers,
                   "sgp launch: run each peer on its own emulated host (a network namespace here, "
                   "needs root and iproute2) whose egress tc limits to this rate: 100mbit, 1gbit, "
                   "... or unlimited (none: no emulation)",
                   S::peers, true, &C::link_rate, Range{}, check_link_rate);
}

// Faults: tolerating them (asgp) and injecting them.
void add_fault_rows(std::vector<std::unique_ptr<Setting>>& r) {
  using C = TrainConfig;
  add<bool>(r, "running_sums", kPeers,
            "asgp: lost, duplicated or reordered messages cost nothing, by acknowledged pushes "
            "or running totals (--acked-pushes); --no-running-sums: plain push-sum, which "
            "faults bias",
            S::peers, true, &C::running_sums);
  add<bool>(r, "acked_pushes", kPeers,
            "asgp: each push carries float32 mass and its sender keeps it until the receiver "
            "acknowledges it, sending it again until then (--no-acked-pushes: each edge carries "
            "the running total of the mass pushed on it instead, with a float64 copy of the "
            "model per edge at each end; docs/asynchronous.md)",
            S::peers, true, &C::acked_pushes);
  add<double>(r, "partner_wait", kPeers,
              "asgp: after its push a peer waits up to this many times its own round time "
              "(waits not counted) for that round's in-neighbours that keep pace, so that calm "
              "peers mix as closely as sgp's; a straggler further behind is not waited for "
              "(0: never wait, fully asynchronous)",
              S::peers, true, &C::partner_wait, between(0, 100));
  add<std::string>(r, "inject", kPeers,
                   "inject transport faults, seeded: drop=P,dup=P,reorder=P,delay=Nms,seed=S "
                   "(any subset; for experiments and tests)",
                   S::peers, true, &C::inject, Range{}, check_inject);
  add<PeerFailure>(r, "on_peer_failure", kPeers,
                   "sgp launch, when a peer dies: continue (the others go on without it), stop "
                   "(stop them all) or auto (continue for asgp, stop for the others)",
                   S::peers, true, &C::on_peer_failure);
  add<int>(r, "sign_flip_rank", kPeers,
           "attack simulation for robustness experiments: this rank follows the protocol but "
           "pushes its parameters sign-flipped (-x) to its out-neighbours (-1: none; sgp and "
           "dpsgd on the CPU)",
           S::peers, true, &C::sign_flip_rank, between(-1, 1 << 20));
  add<bool>(r, "leave_on_term", kPeers,
            "asgp: on SIGTERM hand this peer's mass to a neighbour and exit cleanly", S::peers,
            false, &C::leave_on_term);
  add<std::string>(r, "straggler", kPeers,
                   "simulate a straggler: RANK:FACTOR makes that rank's training steps take "
                   "FACTOR times as long (it sleeps after each one; for experiments)",
                   S::peers, true, &C::straggler, Range{}, check_straggler);
  add<Work>(r, "work", kPeers,
            "what a run's length counts: per-peer (each peer trains --epochs of its shard) or "
            "budget (--epochs x the training set's samples over all peers together; a fast peer "
            "takes more of them, a straggler less; asgp and agt)",
            S::peers, true, &C::work);
}

// What is written where.
void add_report_rows(std::vector<std::unique_ptr<Setting>>& r) {
  using C = TrainConfig;
  add<std::string>(r, "run_dir", kReport, "where to write results (default runs/<command>-<time>)",
                   S::every_run, false, &C::run_dir);
  add<bool>(r, "overwrite", kReport,
            "delete the results of an earlier run in --run-dir first (only sgp's own files); "
            "without it, a run refuses a directory that holds another run's results",
            S::every_run, false, &C::overwrite);
  add<std::int64_t>(r, "log_every", kReport, "iterations between records in peer-<rank>.jsonl",
                    S::every_run, true, &C::log_every, at_least(1));
  add<double>(r, "eval_every", kReport, "epochs between test-accuracy evaluations", S::every_run,
              true, &C::eval_every, above(0));
  add<bool>(r, "final_eval", kReport,
            "each peer evaluates its final model on the test set; --no-final-eval: none does, "
            "and sgp launch's monitor evaluates the run's average model alone (a slow peer's "
            "evaluation no longer ends the run)",
            S::every_run, true, &C::final_eval);
  add<LogLevel>(r, "log_level", kReport, "trace, debug, info, warn, error or off", S::every_run,
                true, &C::log_level);
}

std::vector<std::unique_ptr<Setting>> make_table() {
  std::vector<std::unique_ptr<Setting>> rows;
  for (auto add_rows : {add_model_rows, add_optimiser_rows, add_compute_rows, add_peer_rows,
                        add_connection_rows, add_fault_rows, add_report_rows}) {
    add_rows(rows);
  }
  return rows;
}

const std::vector<std::unique_ptr<Setting>>& table() {
  static const auto rows = make_table();
  return rows;
}

}  // namespace

std::string setting_flag(std::string_view key) {
  std::string name(key);
  std::replace(name.begin(), name.end(), '_', '-');
  return "--" + name;
}

std::span<const Setting* const> training_settings() {
  static const auto pointers = [] {
    std::vector<const Setting*> out;
    for (const auto& row : table()) out.push_back(row.get());
    return out;
  }();
  return pointers;
}

std::span<const Setting* const> setting_aliases() {
  static const HiddenWidthsAlias hidden;
  static const std::vector<const Setting*> aliases = {&hidden};
  return aliases;
}

const Setting* find_setting(std::string_view key) {
  for (const Setting* s : training_settings())
    if (s->key() == key) return s;
  for (const Setting* s : setting_aliases())
    if (s->key() == key) return s;
  return nullptr;
}

std::vector<std::string> setting_arguments(const TrainConfig& config,
                                           std::span<const std::string_view> keys) {
  std::vector<std::string> args;
  for (auto key : keys) {
    const Setting* s = find_setting(key);
    SGP_ENFORCE(s != nullptr, "no setting '{}'", key);
    append_setting_arguments(args, *s, config);
  }
  return args;
}

namespace {

// The combinations of issue 35's update rules that are refused, and why.
void validate_update_rules(const TrainConfig& c) {
  const AlgorithmInfo& row = info(c.algo);
  if (c.slow_momentum > 0.0 && c.global_average_every == 0) {
    throw InputError(
        "--slow-momentum: SlowMo steps at the exact averages of --global-average-every H; give "
        "an H > 0 too");
  }
  if (c.global_average_every > 0) {
    if (!row.communicates || row.mode != gossip::Mode::sync || row.tracks_gradient) {
      throw InputError(fmt::format(
          "--global-average-every: exact averages replace synchronous gossip rounds of sgp, "
          "dpsgd or exact; {} does not have them{}",
          name_of(c.algo),
          row.mode == gossip::Mode::allreduce ? " (allreduce averages exactly every round)"
          : row.tracks_gradient ? " (gt: an average of z would not keep the tracker's sum)"
                                : ""));
    }
    if (c.gossip_every != 1) {
      throw InputError(fmt::format(
          "--global-average-every {} with --gossip-every {}: periodic exact averages replace "
          "rounds of gossip every iteration; use --gossip-every 1",
          c.global_average_every, c.gossip_every));
    }
  }
  if (row.tracks_gradient && c.momentum_kind == MomentumKind::quasi_global) {
    throw InputError(fmt::format(
        "--momentum-kind quasi-global with --algo {}: gradient tracking tracks the local "
        "momentum (docs/optimizers.md); use --momentum-kind local",
        name_of(c.algo)));
  }
  // A peer that leaves or fails takes its tracker mass away: the others' trackers would sum to
  // their gradients plus what it held, a bias that never decays (docs/optimizers.md).
  if (row.tracks_gradient && row.mode == gossip::Mode::async &&
      (c.leave_on_term || c.on_peer_failure == PeerFailure::go_on)) {
    throw InputError(fmt::format(
        "{} with --algo {}: a peer that leaves or fails takes its share of the gradient "
        "tracker with it, and the others' trackers would stay biased; gradient tracking is "
        "fail-stop (use --on-peer-failure auto or stop, without --leave-on-term)",
        c.leave_on_term ? "--leave-on-term" : "--on-peer-failure continue", name_of(c.algo)));
  }
}

}  // namespace

void validate(const TrainConfig& c) {
  for (const Setting* s : training_settings()) {
    if (auto problem = s->problem(c); !problem.empty()) {
      throw InputError(fmt::format("{}: {}", s->flag(), problem));
    }
  }
  if (!info(c.algo).checkpoints && (c.checkpoint_every > 0 || c.resume)) {
    throw InputError(fmt::format(
        "{}: {} does not checkpoint (its peers are never at the same iteration); {}",
        c.resume ? "--resume" : "--checkpoint-every", name_of(c.algo),
        info(c.algo).joins ? "a peer that fails is excluded and may rejoin with sgp peer --join"
                           : "it is fail-stop: a failed run starts again"));
  }
  require_compression_applies(c, std::nullopt);
  if (!c.monitor.empty()) Endpoint::parse(c.monitor, "--monitor");
  if (c.resume && c.overwrite) {
    throw InputError("--resume and --overwrite: give one (continue the run, or replace it)");
  }
  // (gt: clipping a neighbour's [x; y] would take tracker mass the invariant needs)
  const bool synchronous_push_sum = info(c.algo).communicates &&
                                    info(c.algo).mode == gossip::Mode::sync &&
                                    !info(c.algo).tracks_gradient;
  if ((c.robust != gossip::Robust::none || c.sign_flip_rank >= 0) &&
      (!synchronous_push_sum || c.compress != gossip::Compression::none)) {
    throw InputError(fmt::format(
        "{}: measuring and clipping neighbours' models needs synchronous push-sum of float32 "
        "payloads (sgp, dpsgd, exact with --compress none); {} with --compress {} does not have "
        "it",
        c.robust != gossip::Robust::none ? "--robust clip" : "--sign-flip-rank", name_of(c.algo),
        name_of(c.compress)));
  }
  if (!c.lr_milestones.empty() && c.lr_decay != model::LrDecay::step) {
    throw InputError(fmt::format("--lr-milestones: only step decay uses them, but --lr-decay is {}",
                                 name_of(c.lr_decay)));
  }
  validate_update_rules(c);
  if (c.work == Work::budget && info(c.algo).mode != gossip::Mode::async) {
    throw InputError(fmt::format(
        "--work budget: only peers that never wait for each other (asgp, agt) can take unequal "
        "shares of the samples; {} runs in lock step (use --work per-peer)",
        name_of(c.algo)));
  }
}

void to_json(nlohmann::json& j, const TrainConfig& c) {
  j = nlohmann::json::object();
  for (const Setting* s : training_settings()) j[std::string(s->key())] = s->get(c);
}

TrainConfig settings_from_json(const nlohmann::json& object, const std::string& source,
                               std::span<const std::string_view> other_keys, TrainConfig base) {
  if (!object.is_object()) {
    throw InputError(fmt::format("{}: expected a JSON object of settings", source));
  }
  for (const auto& [key, value] : object.items()) {
    const Setting* s = find_setting(key);
    if (!s) {
      if (std::find(other_keys.begin(), other_keys.end(), key) != other_keys.end()) continue;
      throw InputError(fmt::format("{}: {}: not a setting", source, key));
    }
    try {
      s->set(base, value);
    } catch (const SettingError& e) {
      throw InputError(fmt::format("{}: {}: {}", source, key, e.what()));
    }
  }
  return base;
}

}  // namespace sgp::config
