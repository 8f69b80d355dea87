// sgp simulate's settings table (sgp/simulate/simulate_settings.hpp): every row is a flag of
// `sgp simulate` and, unless the sweep sets it itself, a key of simulate sweeps, and both refuse
// the same values with the same words, because both read the row.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "../src/cli/setting_flags.hpp"
#include "sgp/experiment/sweep_spec.hpp"
#include "sgp/simulate/simulate_run.hpp"
#include "sgp/simulate/simulate_settings.hpp"
#include "support/input_error.hpp"
#include "support/text.hpp"

using sgp::simulate::SimulateSetting;
using sgp::simulate::SimulateSettings;

namespace {

// Parses `args` with every row's flag; what apply() throws, or "".
std::string flag_error(std::vector<std::string> args) {
  CLI::App app;
  sgp::cli::FlagValues<SimulateSettings> flags;
  for (const SimulateSetting* s : sgp::simulate::simulate_settings()) flags.add_flag(app, *s, {});
  std::reverse(args.begin(), args.end());  // CLI11 parses from the back
  app.parse(args);
  return sgp::testing::input_error_of([&] { flags.apply({}); });
}

std::string sweep_error(const std::string& simulate_section) {
  const std::string text =
      "name = \"x\"\ncommand = \"simulate\"\n[grid]\npeers = [8]\n[simulate]\n" + simulate_section +
      "\n";
  return sgp::testing::input_error_of(
      [&] { sgp::experiment::parse_sweep_spec(text, "sim.toml", false); });
}

// A value above the upper bound of a row's help hint ("INT in [1, 268435456]": 536870913), or
// "" for a row without one.
std::string above_bounds(const std::string& hint) {
  const auto comma = hint.find(", ");
  if (hint.find(" in ") == std::string::npos || comma == std::string::npos) return "";
  const double max = std::stod(hint.substr(comma + 2));
  return fmt::format("{}", 2 * max + 1);
}

// What a message says after "<where>: ": the part that comes from the row.
std::string after(const std::string& message, const std::string& where) {
  const auto at = message.find(where + ": ");
  return at == std::string::npos ? "(no " + where + " in: " + message + ")"
                                 : message.substr(at + where.size() + 2);
}

}  // namespace

TEST_CASE("every simulate option is a flag and a sweep key, refusing a value out of range alike") {
  int bounded = 0;
  for (const SimulateSetting* s : sgp::simulate::simulate_settings()) {
    const std::string key(s->key()), hint = s->value_hint();
    CAPTURE(key);
    CAPTURE(hint);
    // The default is accepted as a flag and, for what sweeps may set, as a sweep key (unless it
    // means "not given", as --peers 0).
    const std::string shown = s->text(SimulateSettings{});
    const bool a_value = s->problem(SimulateSettings{}).empty() && !shown.empty();
    if (!s->is_switch() && a_value) CHECK(flag_error({s->flag(), shown}).empty());
    if (s->in_sweeps() && a_value) {  // on a run that has every option (--drop: async)
      const std::string run =
          key == "algo" || key == "workload" ? "" : "algo = \"asgp\"\nworkload = \"quadratic\"\n";
      CHECK(sweep_error(run + key + " = " + s->get(SimulateSettings{}).dump()).empty());
    }
    const std::string bad = above_bounds(hint);
    if (bad.empty()) continue;
    ++bounded;
    const std::string from_flag = after(flag_error({s->flag(), bad}), s->flag());
    CHECK(sgp::testing::contains(from_flag, "expected "));
    if (s->in_sweeps())
      CHECK(after(sweep_error(key + " = " + bad), "simulate." + key) == from_flag);
  }
  CHECK(bounded >= 12);  // peers, dim, rounds, threads, lr, momentum, ...
}

TEST_CASE("the sweep sets the topology, its size and where results go; sweep files cannot") {
  for (const SimulateSetting* s : sgp::simulate::simulate_settings()) {
    const std::string key(s->key());
    const bool sweep_decides = key == "topology" || key == "peers" || key == "run_dir" ||
                               key == "overwrite" || key == "log_level";
    CAPTURE(key);
    CHECK(s->in_sweeps() != sweep_decides);
  }
  CHECK(sgp::testing::contains(sweep_error("run_dir = \"x\""), "simulate.run_dir: unknown key"));
}

TEST_CASE("the older --mode is an alias of --algo, as a flag and as a sweep key") {
  const auto* mode = sgp::simulate::find_simulate_setting("mode");
  REQUIRE(mode != nullptr);
  SimulateSettings s;
  mode->parse(s, "async");
  const auto command = sgp::simulate::simulate_command(s, {"mode"});
  CHECK(command.settings.algo == sgp::simulate::SimulatedAlgorithm::asgp);
  CHECK(sgp::testing::contains(sweep_error("mode = \"lazy\""),
                               "simulate.mode: 'lazy' is not one of sync, async"));
}

TEST_CASE("the older --drop, --dup and --delay set parts of --inject, read by its parser") {
  SimulateSettings s;
  for (const auto& [key, value] : {std::pair("drop", "0.25"), {"dup", "0.5"}, {"delay", "3"}})
    sgp::simulate::find_simulate_setting(key)->parse(s, value);
  CHECK(s.inject == "drop=0.25,dup=0.5,delay=3");
  CHECK(sgp::simulate::find_simulate_setting("delay")->get(s) == 3);
  CHECK(sweep_error("algo = \"asgp\"\ndrop = 0.25").empty());
  CHECK(sgp::testing::contains(sweep_error("algo = \"asgp\"\ndrop = 1.5"),
                               "simulate.drop: 'drop=1.5': a probability in [0, 1) is needed"));
  CHECK(sgp::testing::contains(flag_error({"--inject", "drop=0.25,delay=20ms"}),
                               "--inject: 'delay=20ms': a non-negative integer is needed"));
}
