// `sgp emulate up|down`: emulated hosts with limited links on this machine
// (sgp/launch/emulated_hosts.hpp), for running peers by hand, one per host.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <string>

#include "commands.hpp"
#include "sgp/config/link_rate.hpp"
#include "sgp/error.hpp"
#include "sgp/launch/emulated_hosts.hpp"
#include "sgp/log.hpp"

namespace sgp::cli {

namespace {

struct EmulateOptions {
  std::string prefix = "sgpemu";
  std::string topology;
  std::string rate = "unlimited";
  std::string out;
};

}  // namespace

void add_emulate_command(CLI::App& app) {
  auto o = std::make_shared<EmulateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "emulate",
      "Emulated hosts with limited links on this machine (needs root and iproute2): `up` makes "
      "one network namespace per rank of a topology, each with a tc tbf egress limit, joined by "
      "a bridge; `down` removes them. (`sgp launch --link-rate R` does all of this by itself for "
      "one run.)");
  cmd->require_subcommand(1);
  CLI::App* up = cmd->add_subcommand(
      "up",
      "Create PREFIX-0 .. PREFIX-<N-1> and write --out, the topology readdressed onto them. Run "
      "a peer in host r with `ip netns exec PREFIX-r sgp peer --config RUN/config.json --rank r` "
      "after `sgp launch --prepare-only --topology OUT --insecure --monitor "
      "tcp://BRIDGE:29499`, and the monitor here with `sgp monitor --config RUN/config.json "
      "--bind tcp://BRIDGE:29499`.");
  up->add_option("--topology", o->topology, "the topology (one host per rank)")
      ->required()
      ->check(CLI::ExistingFile);
  up->add_option("--rate", o->rate, "egress limit of every host: 100mbit, 1gbit, ... or unlimited")
      ->capture_default_str();
  up->add_option("--out", o->out, "where to write the readdressed topology")->required();
  up->add_option("--prefix", o->prefix, "names of the namespaces (PREFIX-r) and bridge (PREFIX-br)")
      ->capture_default_str();
  up->callback([o] {
    configure_logging(-1, LogLevel::info);
    config::LinkRate rate;
    try {
      rate = config::parse_link_rate(o->rate);
    } catch (const InputError& e) {
      throw InputError(std::string("--rate ") + e.what());
    }
    if (!rate.emulated) throw InputError("--rate none: give a rate, or unlimited");
    std::fputs(launch::emulate_up(o->prefix, o->topology, rate, o->out).c_str(), stdout);
  });
  CLI::App* down = cmd->add_subcommand("down", "Remove the hosts PREFIX-* and the bridge");
  down->add_option("--prefix", o->prefix, "as given to up")->capture_default_str();
  down->callback([o] {
    configure_logging(-1, LogLevel::info);
    launch::require_emulation_tools();
    std::printf("removed %d emulated hosts %s-*\n", launch::remove_emulated_hosts(o->prefix),
                o->prefix.c_str());
  });
}

}  // namespace sgp::cli
