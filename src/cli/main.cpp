// The `sgp` executable: one binary, one subcommand per job (see `sgp --help`).
#include <sys/resource.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>

#include "commands.hpp"
#include "sgp/compute/blas_kernels.hpp"
#include "sgp/error.hpp"
#include "sgp_config.h"

namespace {

// Every socket a peer accepts is a descriptor, and the common soft limit (1024) is far below the
// usual hard one: take all the hard limit allows, so that a flood of connections does not leave
// the run without descriptors for its results.
void raise_descriptor_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &limit);  // on failure, the limit stays as it was
}

}  // namespace

int main(int argc, char** argv) {
  // Re-executes once with OPENBLAS_CORETYPE set when OpenBLAS fell back to slow generic kernels
  // (see sgp/compute/blas_kernels.hpp). Done first, before any thread or file exists.
  if (const auto core = sgp::compute::better_blas_coretype()) {
    ::setenv("OPENBLAS_CORETYPE", core->c_str(), 1);
    ::execv("/proc/self/exe", argv);  // on failure, carry on with the slow kernels
  }
  raise_descriptor_limit();
  CLI::App app{
      "sgp: decentralized deep learning by Stochastic Gradient Push (Assran et al., ICML 2019).\n"
      "Peers train one model with no central server, mixing parameters by push-sum gossip."};
  app.set_version_flag("--version", SGP_VERSION);
  app.require_subcommand(1);
  app.fallthrough();
  sgp::cli::add_train_command(app);
  sgp::cli::add_peer_command(app);
  sgp::cli::add_launch_command(app);
  sgp::cli::add_monitor_command(app);
  sgp::cli::add_topology_command(app);
  sgp::cli::add_consensus_command(app);
  sgp::cli::add_sweep_command(app);
  sgp::cli::add_keygen_command(app);
  sgp::cli::add_summarize_command(app);
  sgp::cli::add_simulate_command(app);
  sgp::cli::add_eval_command(app);
  sgp::cli::add_emulate_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every usage error exits 2, as sgp's own input errors do.
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const sgp::InputError& e) {
    std::fprintf(stderr, "sgp: error: %s\n", e.what());
    return 2;
  } catch (const sgp::Interrupted& e) {
    std::fprintf(stderr, "sgp: %s\n", e.what());
    return 128 + e.signal();
  } catch (const sgp::IoError& e) {
    std::fprintf(stderr, "sgp: I/O error: %s\n", e.what());
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sgp: internal error: %s\n", e.what());
    return 4;
  }
  return 0;
}
