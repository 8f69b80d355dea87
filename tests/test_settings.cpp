// The settings table (sgp/config/settings.hpp) and its command-line flags: every setting survives
// config.json and the command line unchanged, and bad values are refused naming the setting.
#include <CLI/CLI.hpp>

#include <chrono>
#include <fstream>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "../src/cli/setting_flags.hpp"
#include "sgp/config/settings.hpp"
#include "sgp/config/straggler.hpp"
#include "sgp/run/run_config.hpp"
#include "sgp/run/run_directory.hpp"
#include "sgp/run/run_files.hpp"
#include "support/input_error.hpp"
#include "support/temp_dir.hpp"
#include "support/text.hpp"

using sgp::config::TrainConfig;

namespace {

// Every field away from its default (the first test checks that none was forgotten).
TrainConfig unusual() {
  TrainConfig c;
  c.model = "mlp:17,9";
  c.partition = "dirichlet:0.5";
  c.data_dir = "/data/fm";
  c.seed = 7;
  c.epochs = 2.5;
  c.max_iterations = 123;
  c.batch_size = 48;
  c.lr = 0.25;
  c.lr_scaling = sgp::model::LrScaling::none;
  c.warmup_epochs = 0.5;
  c.lr_decay = sgp::model::LrDecay::step;
  c.lr_milestones = {1.0, 2.0};
  c.lr_gamma = 0.5;
  c.momentum = 0.8f;
  c.nesterov = false;
  c.weight_decay = 5e-4f;
  c.momentum_kind = sgp::config::MomentumKind::quasi_global;
  c.global_average_every = 5;
  c.slow_momentum = 0.5;
  c.device = "cpu";
  c.blas_threads = 2;
  c.tf32 = true;
  c.topology = "t.dot";
  c.algo = sgp::config::Algorithm::osgp;
  c.tau = 3;
  c.compress = sgp::gossip::Compression::bf16;
  c.consensus_step = 0.25;
  c.robust = sgp::gossip::Robust::clip;
  c.sign_flip_rank = 3;
  c.gossip_every = 2;
  c.self_weight = 0.3;
  c.timeout_ms = 1234;
  c.checkpoint_every = 40;
  c.resume = true;
  c.monitor = "tcp://127.0.0.1:5000";
  c.running_sums = false;
  c.acked_pushes = false;
  c.partner_wait = 0.5;
  c.inject = "drop=0.1,seed=3";
  c.on_peer_failure = sgp::config::PeerFailure::stop;
  c.leave_on_term = true;
  c.straggler = "2:4";
  c.work = sgp::config::Work::budget;
  c.keys_dir = "keys";
  c.insecure = true;
  c.local_ipc = false;
  c.local_fast_path = false;
  c.comm_thread = "off";
  c.link_rate = "1gbit";
  c.run_dir = "runs/x";
  c.overwrite = true;
  c.log_every = 7;
  c.eval_every = 0.5;
  c.final_eval = false;
  c.log_level = sgp::LogLevel::debug;
  return c;
}

std::vector<std::string_view> all_keys() {
  std::vector<std::string_view> keys;
  for (const auto* s : sgp::config::training_settings()) keys.push_back(s->key());
  return keys;
}

// Parses `args` with every setting's flag; returns the configuration (no validation).
TrainConfig parse_flags(std::vector<std::string> args, TrainConfig base = {}) {
  CLI::App app;
  auto flags = sgp::cli::SettingFlags::add(app, true);
  std::reverse(args.begin(), args.end());  // CLI11 parses from the back
  app.parse(args);
  return flags->apply(base);
}

std::string flag_error(std::vector<std::string> args) {
  return sgp::testing::input_error_of([&] { sgp::config::validate(parse_flags(std::move(args))); });
}

}  // namespace

TEST_CASE("the test configuration differs from the defaults in every setting") {
  const TrainConfig defaults, c = unusual();
  for (const auto* s : sgp::config::training_settings()) {
    CAPTURE(s->key());
    CHECK(s->get(c) != s->get(defaults));
  }
  // --resume and --overwrite exclude each other; each is fine alone.
  CHECK(sgp::testing::input_error_of([&] { sgp::config::validate(c); }) ==
        "--resume and --overwrite: give one (continue the run, or replace it)");
  TrainConfig resumed = c;
  resumed.overwrite = false;
  // --robust clip and --sign-flip-rank need synchronous push-sum of float32 payloads.
  CHECK(sgp::testing::input_error_of([&] { sgp::config::validate(resumed); })
            .starts_with("--robust clip: measuring and clipping neighbours' models needs "
                         "synchronous push-sum"));
  resumed.algo = sgp::config::Algorithm::sgp;
  resumed.compress = sgp::gossip::Compression::none;
  // --global-average-every replaces rounds of gossip every iteration.
  CHECK(sgp::testing::input_error_of([&] {
          sgp::config::validate(resumed);
        }).starts_with("--global-average-every 5 with --gossip-every 2"));
  resumed.gossip_every = 1;
  // A budget of samples needs peers that do not wait for each other.
  CHECK(sgp::testing::input_error_of([&] {
          sgp::config::validate(resumed);
        }).starts_with("--work budget: only peers that never wait for each other (asgp, agt)"));
  resumed.work = sgp::config::Work::per_peer;
  CHECK_NOTHROW(sgp::config::validate(resumed));
}

TEST_CASE("every setting survives config.json and the command line") {
  const TrainConfig c = unusual();
  const nlohmann::json j = c;
  CHECK(j.size() == sgp::config::training_settings().size());
  CHECK(sgp::config::settings_from_json(j, "config.json", {}) == c);
  const auto keys = all_keys();
  CHECK(parse_flags(sgp::config::setting_arguments(c, keys)) == c);
  // Floats are written as the number a person would type.
  CHECK(j["momentum"].dump() == "0.8");
}

TEST_CASE("config.json of a run reads back, also one written before eval_every was renamed") {
  sgp::testing::TempDir dir;
  sgp::run::RunDirectory run(dir.path(), -1);
  run.claim({});
  sgp::run::write_run_config(run, unusual(), "launch", 4);
  const auto back = sgp::run::read_run_config(dir / "config.json");
  // --overwrite is what that start did, not a setting of the run: a copy must not delete it.
  auto expected = unusual();
  expected.overwrite = false;
  CHECK(back.settings == expected);
  CHECK(sgp::testing::slurp(dir / "config.json").find(run.run_id()) != std::string::npos);
  CHECK(back.command == "launch");
  CHECK(back.peers == 4);
  std::ofstream(dir / "old.json") << R"({"eval_every_epochs": 0.5, "lr": 0.2, "command": "peer"})";
  const auto old = sgp::run::read_run_config(dir / "old.json");
  CHECK(old.settings.eval_every == 0.5);
  CHECK(old.settings.lr == 0.2);
  std::ofstream(dir / "bad.json") << R"({"batch_size": 1.5})";
  CHECK_THROWS_WITH_AS(sgp::run::read_run_config(dir / "bad.json"),
                       doctest::Contains("bad.json: batch_size: expected an integer, got 1.5"),
                       sgp::InputError);
  std::ofstream(dir / "typo.json") << R"({"batchsize": 4})";
  CHECK_THROWS_WITH_AS(sgp::run::read_run_config(dir / "typo.json"),
                       doctest::Contains("typo.json: batchsize: not a setting"), sgp::InputError);
}

TEST_CASE("config.json that is not one object of distinct keys is refused naming the file") {
  sgp::testing::TempDir dir;
  auto error_of = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return sgp::testing::input_error_of([&] { sgp::run::read_run_config(dir / name); });
  };
  // An array was an internal error (exit 4): it is the user's file, so an InputError (exit 2).
  CHECK(error_of("array.json", R"([{"lr": 0.1}])") ==
        (dir / "array.json").string() + ": expected a JSON object of settings, got array");
  CHECK(error_of("dup.json", R"({"lr": 0.1, "batch_size": 8, "lr": 0.5})") ==
        (dir / "dup.json").string() + ": key \"lr\" appears more than once");
  CHECK(error_of("broken.json", R"({"lr": )")
            .starts_with((dir / "broken.json").string() + ": not valid JSON"));
  CHECK(error_of("command.json", R"({"command": 5})") ==
        (dir / "command.json").string() + ": command: expected a string");
  // The same key in two different objects is not a duplicate (nothing here nests, but the rule
  // is per object).
  CHECK(error_of("fine.json", R"({"lr": 0.2, "command": "peer"})").empty());
}

TEST_CASE("an integer beyond its C++ type is refused with the setting's own range") {
  CHECK(flag_error({"--batch-size", "99999999999"}) ==
        "--batch-size: expected an integer in [1, 65536], got 99999999999");
  CHECK(flag_error({"--batch-size", "99999999999999999999999"}) ==
        "--batch-size: expected an integer in [1, 65536], got 99999999999999999999999");
  sgp::testing::TempDir dir;
  std::ofstream(dir / "big.json") << R"({"batch_size": 99999999999})";
  CHECK(sgp::testing::input_error_of([&] { sgp::run::read_run_config(dir / "big.json"); }) ==
        (dir / "big.json").string() +
            ": batch_size: expected an integer in [1, 65536], got 99999999999");
  CHECK(flag_error({"--timeout-ms", "99999999999"}) ==
        "--timeout-ms: expected an integer in [1, 86400000], got 99999999999");
  // A setting bounded below only: its lower bound, and the type's upper one.
  CHECK(flag_error({"--log-every", "99999999999999999999"}) ==
        "--log-every: expected an integer in [1, 9223372036854775807], got 99999999999999999999");
}

TEST_CASE("flags over a base configuration change only what they name") {
  TrainConfig base = unusual();
  const auto c = parse_flags({"--lr", "0.5", "--no-tf32"}, base);
  base.lr = 0.5;
  base.tf32 = false;
  CHECK(c == base);
}

TEST_CASE("help shows each switch's real default; --no-X turns it off") {
  CLI::App app;
  sgp::cli::SettingFlags::add(app, true);
  const std::string help = app.help();
  CHECK(sgp::testing::contains(help, "Nesterov momentum (default on; --no-nesterov for off)"));
  CHECK_FALSE(sgp::testing::contains(help, "{false}"));
  CHECK_FALSE(parse_flags({"--no-nesterov"}).nesterov);
  CHECK(parse_flags({"--nesterov"},
                    [] {
                      TrainConfig c;
                      c.nesterov = false;
                      return c;
                    }())
            .nesterov);
}

TEST_CASE("the algorithm table's columns decide whether checkpoints apply") {
  for (const auto& a : sgp::config::algorithms()) {
    CAPTURE(a.name);
    const auto error = flag_error({"--checkpoint-every", "10", "--algo", std::string(a.name)});
    CHECK(error.empty() == a.checkpoints);
    if (!a.checkpoints) {
      CHECK(error == "--checkpoint-every: " + std::string(a.name) +
                         " does not checkpoint (its peers are never at the same iteration); " +
                         (a.joins ? "a peer that fails is excluded and may rejoin with sgp peer "
                                    "--join"
                                  : "it is fail-stop: a failed run starts again"));
    }
  }
  // asgp alone: peers fail, join and leave; none of asgp's or agt's is ever at one iteration
  // with the others (agt is fail-stop: a peer's tracker mass cannot be lost).
  for (const auto& a : sgp::config::algorithms()) {
    CAPTURE(a.name);
    const bool asgp = a.algo == sgp::config::Algorithm::asgp;
    CHECK(a.joins == asgp);
    CHECK(a.tolerates_failures == asgp);
    CHECK(a.checkpoints == (a.mode != sgp::gossip::Mode::async));
  }
}

TEST_CASE("bad values are refused naming the flag and what was expected") {
  CHECK(flag_error({"--batch-size", "0"}) ==
        "--batch-size: expected an integer in [1, 65536], got 0");
  CHECK(flag_error({"--batch-size", "100000000"}) ==
        "--batch-size: expected an integer in [1, 65536], got 100000000");
  CHECK(flag_error({"--lr", "nan"}) == "--lr: expected a number in [0, 1000], got nan");
  CHECK(flag_error({"--epochs", "1e300"}) ==
        "--epochs: expected a number in (0, 10000], got 1e+300");
  CHECK(flag_error({"--momentum", "nan"}) == "--momentum: expected a number in [0, 1), got nan");
  CHECK(flag_error({"--warmup-epochs", "inf"}) ==
        "--warmup-epochs: expected a number in [0, 10000], got inf");
  CHECK(flag_error({"--algo", "sgd"}) ==
        "--algo: 'sgd' is not one of sgp, osgp, asgp, local, dpsgd, exact, allreduce, gt, ogt, "
        "agt");
  CHECK(flag_error({"--compress", "fp8"}) ==
        "--compress: 'fp8' is not one of none, fp16, bf16, topk:R, randk:R, sign, qsgd:L");
  CHECK(flag_error({"--compress", "topk:2"}).starts_with("--compress: topk:2: the fraction must"));
  CHECK(flag_error({"--compress", "topk:0.01", "--algo", "asgp"})
            .starts_with("--compress topk:0.01: asgp does not send"));
  CHECK(flag_error({"--compress", "sign", "--algo", "gt"})
            .starts_with("--compress sign: compressed gossip is built for push-sum rounds of x "
                         "alone, not gradient tracking"));
  for (const char* algo : {"allreduce", "asgp", "local"}) {
    CHECK(flag_error({"--compress", "fp16", "--algo", algo})
              .starts_with(std::string("--compress fp16: ") + algo +
                           " does not send push-sum rounds of float32 x"));
  }
  CHECK(flag_error({"--compress", "bf16", "--algo", "ogt"})
            .starts_with("--compress bf16: ogt sends its rounds of [x; y] in float32 only"));
  CHECK(flag_error({"--robust", "median"}) == "--robust: 'median' is not one of none, clip");
  for (const char* algo : {"osgp", "asgp", "allreduce", "local", "ogt"}) {
    CHECK(flag_error({"--robust", "clip", "--algo", algo})
              .starts_with(std::string("--robust clip: measuring and clipping neighbours' models "
                                       "needs synchronous push-sum")));
    CHECK(flag_error({"--sign-flip-rank", "1", "--algo", algo}).starts_with("--sign-flip-rank: "));
  }
  CHECK(flag_error({"--robust", "clip", "--compress", "fp16"}).starts_with("--robust clip: "));
  CHECK(flag_error({"--sign-flip-rank", "-2"}) ==
        "--sign-flip-rank: expected an integer in [-1, 1048576], got -2");
  CHECK(flag_error({"--hidden", "64,0"}) == "--hidden: expected an integer in [1, 65536], got 0");
  CHECK(flag_error({"--seed", "-1"}) == "--seed: expected an integer >= 0, got '-1'");
  CHECK(flag_error({"--device", "gpu"}) ==
        "--device: 'gpu' is not a device (expected auto, cpu, cuda or cuda:<index>)");
  CHECK(flag_error({"--self-weight", "1"}).starts_with("--self-weight: expected a mixing rate"));
  CHECK(flag_error({"--lr-milestones", "2,1", "--lr-decay", "step"})
            .starts_with("--lr-milestones: milestones must be in increasing order"));
  CHECK(flag_error({"--lr-milestones", "1"}) ==
        "--lr-milestones: only step decay uses them, but --lr-decay is cosine");
  CHECK(flag_error({"--log-level", "loud"}) ==
        "--log-level: 'loud' is not one of trace, debug, info, warn, error, off");
  CHECK(flag_error({"--straggler", "3"}) ==
        "--straggler: '3': no ':' (expected RANK:FACTOR, e.g. 3:4)");
  CHECK(flag_error({"--straggler", "-1:4"}).starts_with("--straggler: '-1:4': RANK must be"));
  CHECK(flag_error({"--link-rate", "1gbps"}) ==
        "--link-rate: '1gbps': no unit (bit, kbit, mbit or gbit) (expected none, unlimited or a "
        "rate such as 100mbit, 1gbit)");
  CHECK(flag_error({"--link-rate", "0.1bit"}).starts_with("--link-rate: '0.1bit': outside"));
  CHECK(flag_error({"--link-rate", "xmbit"}).starts_with("--link-rate: 'xmbit': not a number"));
  for (const char* factor : {"0:0.5", "0:nan", "0:1e9", "0:4x"}) {
    CHECK(flag_error({"--straggler", factor}).find("FACTOR must be a number in [1, 1000]") !=
          std::string::npos);
  }
}

TEST_CASE("a straggler's pause makes its steps FACTOR times as long, on its rank only") {
  using namespace std::chrono_literals;
  const auto spec = sgp::config::parse_straggler_spec("3:4");
  CHECK(spec.applies_to(3));
  CHECK_FALSE(spec.applies_to(2));
  CHECK(sgp::config::straggler_pause(spec, 10ms) == 30ms);
  CHECK(sgp::config::straggler_pause(sgp::config::parse_straggler_spec("0:1.5"), 10ms) == 5ms);
  CHECK_FALSE(sgp::config::parse_straggler_spec("").applies_to(0));
  CHECK_FALSE(sgp::config::parse_straggler_spec("0:1").applies_to(0));
  CHECK(sgp::config::format_straggler_spec(spec) == "3:4");
}

TEST_CASE("a configuration built in code is checked by validate") {
  TrainConfig c;
  c.tau = -1;
  CHECK_THROWS_WITH_AS(sgp::config::validate(c), "--tau: expected an integer in [0, 100], got -1",
                       sgp::InputError);
}
