#pragma once
// Runs the built `sgp` binary (or any command) and captures its exit status and output.
#include <sys/wait.h>

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

}  // namespace sgp::testing
