#pragma once
// Runs the built `sgp` binary (or any command) and captures its exit status and output.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace sgp::testing {

struct CommandResult {
  int exit_code = -1;  // -1 if killed by a signal
  std::string output;  // stdout and stderr together
};

inline std::filesystem::path sgp_binary() {
  const char* build = std::getenv("SGP_BUILD_DIR");
  return std::filesystem::path(build ? build : "build") / "sgp";
}

// A file of the source tree, e.g. source_path("scripts/plot") (tests run in the build
// directory; tests/meson.build sets $SGP_SOURCE_DIR).
inline std::string source_path(const std::string& relative) {
  const char* dir = std::getenv("SGP_SOURCE_DIR");
  return (std::filesystem::path(dir ? dir : ".") / relative).string();
}

// `arguments` is appended to the binary's path and run by /bin/sh.
inline CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return result;
  std::array<char, 4096> buffer{};
  while (std::fgets(buffer.data(), buffer.size(), pipe)) result.output += buffer.data();
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

inline CommandResult run_sgp(const std::string& arguments) {
  return run_command(sgp_binary().string() + " " + arguments);
}

// Starts `command` (run by /bin/sh) in the background with its output in `log`; returns its
// pid, or -1 if fork failed.
inline pid_t start_command(const std::string& command, const std::filesystem::path& log) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", (command + " >" + log.string() + " 2>&1").c_str(), nullptr);
    ::_exit(127);
  }
  return pid;
}

// `sgp <args>` in the background (exec, so signals sent to the pid reach sgp itself).
inline pid_t start_sgp(const std::string& args, const std::filesystem::path& log) {
  return start_command("exec " + sgp_binary().string() + " " + args, log);
}

// A pgrep/pkill pattern for `text` that does not match the shell running pgrep itself (whose
// command line holds the pattern, "[x]yz", not the text "xyz").
inline std::string self_proof(const std::string& text) {
  return "[" + text.substr(0, 1) + "]" + text.substr(1);
}

// Processes whose command line mentions `marker` (e.g. a run directory).
inline int processes_mentioning(const std::string& marker) {
  const auto r = run_command("pgrep -f -- '" + self_proof(marker) + "' | wc -l");
  return std::stoi(r.output);
}

// Sends `signal` to the peer process of `rank` started by `sgp launch` for `run`; true if one
// was found.
inline bool signal_launched_peer(const std::filesystem::path& run, int rank,
                                 const std::string& signal) {
  const auto pattern =
      self_proof("peer --config " + run.string() + "/config.json --rank " + std::to_string(rank));
  return run_command("pkill -" + signal + " -f -- '" + pattern + "'").exit_code == 0;
}

}  // namespace sgp::testing
