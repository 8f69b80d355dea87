// `sgp topology generate|check|describe|render`: make, validate, analyze and draw topology files.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.hpp"
#include "sgp/config/train_config.hpp"
#include "sgp/error.hpp"
#include "sgp/model/model_spec.hpp"
#include "sgp/topology/analysis.hpp"
#include "sgp/topology/dot_file.hpp"
#include "sgp/topology/drawing.hpp"
#include "sgp/topology/generator.hpp"

extern char** environ;

namespace sgp::cli {

namespace {

struct GenerateArgs {
  std::string kind;
  topology::GeneratorOptions options;
  double self_weight = 0.0;
  std::string hosts_file;
  std::string output;
};

constexpr const char* kPlacementHelp =
    "Endpoints: round robin over the hosts (rank r on host r % H) or, with --placement block, "
    "consecutive ranks per host (Slurm's default: the first N % H hosts get one rank more), at "
    "port base-port + the number of lower ranks on that host (list a host once per rank to place "
    "every rank exactly, as in a Slurm job).";

// --host, --hosts FILE and --base-port: where the ranks' endpoints go (generate, readdress).
void add_placement_flags(CLI::App& cmd, std::vector<std::string>& hosts, std::string& hosts_file,
                         int& base_port, topology::Placement& placement) {
  CLI::Option* host =
      cmd.add_option("--host", hosts, "host name(s) or address(es), comma-separated")
          ->delimiter(',')
          ->capture_default_str();
  cmd.add_option("--hosts", hosts_file,
                 "file with one host per line ('#' comments), instead of --host")
      ->excludes(host);
  cmd.add_option("--base-port", base_port,
                 "first port on each host (0: port 0 for every rank, for `sgp launch` to pick "
                 "free ports)")
      ->capture_default_str();
  cmd.add_option_function<std::string>(
         "--placement",
         [&placement](const std::string& name) { placement = topology::parse_placement(name); },
         "round-robin (rank r on host r % H) or block (consecutive ranks per host, as Slurm)")
      ->default_str("round-robin");
}

std::vector<std::string> chosen_hosts(const std::vector<std::string>& hosts,
                                      const std::string& hosts_file) {
  return hosts_file.empty() ? hosts : topology::read_hosts_file(hosts_file);
}

void write_topology(const topology::Schedule& schedule, const std::string& output,
                    const std::string& comment) {
  if (output.empty())
    topology::write_dot(schedule, std::cout, comment);
  else
    topology::write_dot_file(schedule, output, comment);
}

void add_generate(CLI::App& topo) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = topo.add_subcommand(
      "generate",
      std::string("Write a topology file (DOT) to stdout or --output. Weights: uniform over "
                  "out-degree + 1, or --self-weight. ") +
          kPlacementHelp + "\nKinds:\n" + topology::topology_kinds_help());
  cmd->add_option("kind", args->kind, "topology kind (see the list above)")->required();
  cmd->add_option("--peers,-n", args->options.num_peers, "number of peers N (>= 2)")->required();
  CLI::Option* self =
      cmd->add_option("--self-weight", args->self_weight,
                      "mixing rate a in (0, 1): each peer keeps a, spreads 1 - a evenly over its "
                      "out-neighbours");
  cmd->add_option("--degree", args->options.degree,
                  "random-regular: out- and in-degree k (default ceil(log2 N)); hyper-hypercube, "
                  "base: at most k neighbours per round (default 1)");
  cmd->add_option("--seed", args->options.seed, "random-regular, one-peer-random-shift: seed")
      ->capture_default_str();
  add_placement_flags(*cmd, args->options.hosts, args->hosts_file, args->options.base_port,
                      args->options.placement);
  cmd->add_option("--output,-o", args->output, "write here instead of stdout");
  cmd->callback([args, self] {
    const auto kind = topology::parse_topology_kind(args->kind);
    auto options = args->options;
    if (self->count() > 0) options.self_weight = args->self_weight;
    options.hosts = chosen_hosts(options.hosts, args->hosts_file);
    const auto schedule = topology::generate_topology(kind, options);
    write_topology(schedule, args->output, topology::generator_command_line(kind, options));
  });
}

struct ReaddressArgs {
  std::string file;
  std::vector<std::string> hosts = {"127.0.0.1"};
  std::string hosts_file;
  int base_port = 29500;
  topology::Placement placement = topology::Placement::round_robin;
  std::string output;
};

void add_readdress(CLI::App& topo) {
  auto args = std::make_shared<ReaddressArgs>();
  CLI::App* cmd = topo.add_subcommand(
      "readdress",
      std::string("Write a topology file with new endpoints and the same graph, phases and "
                  "weights: a given topology moved onto other hosts (a Slurm allocation). ") +
          kPlacementHelp +
          " CURVE keys are dropped: keys belong to one deployment, so run `sgp keygen` on the "
          "result.");
  cmd->add_option("file", args->file, "the .dot file")->required();
  add_placement_flags(*cmd, args->hosts, args->hosts_file, args->base_port, args->placement);
  cmd->add_option("--output,-o", args->output, "write here instead of stdout");
  cmd->callback([args] {
    auto schedule = topology::read_dot_file(args->file);
    const auto hosts = chosen_hosts(args->hosts, args->hosts_file);
    schedule.set_endpoints(
        topology::place_endpoints(schedule.num_peers(), hosts, args->base_port, args->placement));
    schedule.set_public_keys({});
    write_topology(schedule, args->output,
                   fmt::format("{} readdressed onto {} with base port {}, placement {}", args->file,
                               fmt::join(hosts, ","), args->base_port,
                               topology::placement_name(args->placement)));
  });
}

// What sgp trains on: Fashion-MNIST's 28 x 28 grey images, 10 classes.
constexpr model::Shape kFashionMnistShape{28, 28, 1};

struct FileArgs {
  std::string file;
  bool require_endpoints = false;
  std::int64_t params = 0;  // 0: the parameter count of `model`
  std::string model = config::TrainConfig{}.model;
  double tolerance = 1e-6;
  std::string output;
};

// A subcommand whose first positional is a topology file.
CLI::App* add_file_command(CLI::App& topo, const std::string& name, const std::string& help,
                           FileArgs& args) {
  CLI::App* cmd = topo.add_subcommand(name, help);
  cmd->add_option("file", args.file, "the .dot file")->required();
  return cmd;
}

topology::Schedule read(const FileArgs& args) {
  topology::DotReadOptions options;
  options.require_endpoints = args.require_endpoints;
  return topology::read_dot_file(args.file, options);
}

void add_check(CLI::App& topo) {
  auto args = std::make_shared<FileArgs>();
  CLI::App* cmd = add_file_command(
      topo, "check",
      "Validate a topology file and check that the union of its graphs over one period is "
      "strongly connected (else consensus is impossible), and say whether it averages exactly "
      "after one period. Every problem is listed; the exit status is 0 only for a usable file.",
      *args);
  cmd->add_flag("--require-endpoints", args->require_endpoints,
                "every node must have an endpoint (needed to run peers)");
  cmd->callback([args] {
    // The reader lists connectivity with the file's other problems, all at once.
    topology::DotReadOptions options;
    options.require_endpoints = args->require_endpoints;
    options.require_strongly_connected = true;
    const auto schedule = topology::read_dot_file(args->file, options);
    const auto exact = topology::exact_average_rounds(schedule);
    std::cout << fmt::format("{}: ok: {} peers, period {}, strongly connected{}{}\n", args->file,
                             schedule.num_peers(), schedule.period(),
                             exact ? fmt::format(", exact average after {} rounds", *exact) : "",
                             schedule.has_endpoints() ? ", endpoints for every peer" : "");
  });
}

void add_describe(CLI::App& topo) {
  auto args = std::make_shared<FileArgs>();
  CLI::App* cmd = add_file_command(
      topo, "describe",
      "Print N, period, degrees, the diameter of the union, bytes each peer sends per round and "
      "the consensus rate sigma = ||A (I - 11^T/N)||_2 of the period's mixing product A = "
      "M_{P-1}...M_0 (M_p[j][i] = weight i pushes to j), with the predicted rounds to shrink the "
      "distance to consensus by --tolerance: P * ceil(ln tol / ln sigma).",
      *args);
  cmd->add_option("--model", args->model,
                  "the model whose parameters are pushed (as sgp launch --model), for the bytes "
                  "per round")
      ->capture_default_str();
  cmd->add_option("--params", args->params,
                  "parameter count for the bytes per round, instead of --model's")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--tolerance", args->tolerance, "shrink factor for the predicted rounds")
      ->capture_default_str()
      ->check(CLI::Range(1e-300, 0.999999));
  cmd->callback([args] {
    const auto schedule = read(*args);
    const auto params = args->params > 0
                            ? args->params
                            : static_cast<std::int64_t>(model::parameter_count(
                                  model::parse_model_spec(args->model), kFashionMnistShape, 10));
    std::cout << args->file << "\n"
              << topology::format_report(
                     topology::analyze_topology(schedule, params, args->tolerance));
  });
}

// The path of `program` on $PATH, or nothing.
std::optional<std::filesystem::path> find_on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (!path) return std::nullopt;
  std::string dirs = path;
  for (std::size_t start = 0; start <= dirs.size();) {
    const std::size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::filesystem::path candidate =
        std::filesystem::path(end > start ? dirs.substr(start, end - start) : ".") / program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return std::nullopt;
}

// Runs Graphviz `dot -TFORMAT` on the drawing text (through a temporary file) into `output`.
void run_graphviz(const std::string& drawing, const std::string& format,
                  const std::string& output) {
  const auto dot = find_on_path("dot");
  if (!dot)
    throw IoError(
        "Graphviz `dot` was not found on PATH; install Graphviz (Debian: apt-get install "
        "graphviz) to render, or render to a .dot file and open it in any Graphviz viewer");
  std::string input = (std::filesystem::temp_directory_path() / "sgp-render-XXXXXX").string();
  const int fd = ::mkstemp(input.data());
  if (fd < 0) throw IoError(fmt::format("cannot create a temporary file {}", input));
  const bool written =
      ::write(fd, drawing.data(), drawing.size()) == static_cast<ssize_t>(drawing.size());
  ::close(fd);
  std::vector<std::string> argv_strings = {"dot", "-T" + format, input, "-o", output};
  std::vector<char*> argv;
  for (auto& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  int status = 0;
  const bool ran = written &&
                   ::posix_spawn(&pid, dot->c_str(), nullptr, nullptr, argv.data(), environ) == 0 &&
                   ::waitpid(pid, &status, 0) >= 0;
  ::unlink(input.c_str());
  if (!written) throw IoError(fmt::format("cannot write the temporary file {}", input));
  if (!ran) throw IoError(fmt::format("cannot run {}", dot->string()));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw IoError(fmt::format("`dot -T{} -o {}` failed (see its message above)", format, output));
}

void add_render(CLI::App& topo) {
  auto args = std::make_shared<FileArgs>();
  CLI::App* cmd = add_file_command(
      topo, "render",
      "Draw a topology file: one cluster per phase of a time-varying schedule, every edge "
      "labelled with the weight pushed and every node with the weight kept. OUT's extension "
      "picks the format: png, svg, pdf (through Graphviz `dot`) or dot/gv (the drawing as DOT "
      "text, no Graphviz needed).",
      *args);
  cmd->add_option("out", args->output, "the picture to write, e.g. ring.png")->required();
  cmd->callback([args] {
    const auto drawing = topology::drawing_dot(read(*args), args->file);
    std::string format = std::filesystem::path(args->output).extension().string();
    if (format.size() < 2)
      throw InputError(
          fmt::format("{}: give the picture an extension (.png, .svg, .pdf, .dot)", args->output));
    format = format.substr(1);
    if (format == "dot" || format == "gv") {
      std::ofstream out(args->output);
      if (!(out << drawing && out.flush()))
        throw IoError(fmt::format("{}: cannot write", args->output));
    } else {
      run_graphviz(drawing, format, args->output);
    }
    std::cout << fmt::format("wrote {}\n", args->output);
  });
}

}  // namespace

void add_topology_command(CLI::App& app) {
  CLI::App* topo = app.add_subcommand(
      "topology", "Generate, check, describe and render topology files (Graphviz DOT).");
  topo->require_subcommand(1);
  add_generate(*topo);
  add_readdress(*topo);
  add_check(*topo);
  add_describe(*topo);
  add_render(*topo);
}

}  // namespace sgp::cli
