#include "sgp/launch/local_processes.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "sgp/error.hpp"

namespace sgp::launch {
namespace {

sigset_t watched_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

// Waits up to `timeout` for one of the watched signals; returns it, or 0 on time-out.
int wait_signal(std::chrono::milliseconds timeout) {
  const sigset_t set = watched_signals();
  timespec ts{static_cast<time_t>(timeout.count() / 1000),
              static_cast<long>((timeout.count() % 1000) * 1000000)};
  const int sig = sigtimedwait(&set, nullptr, &ts);
  return sig < 0 ? 0 : sig;
}

// This process's environment with `extra` (NAME=VALUE) laid over it, built before fork: the child
// may only make async-signal-safe calls, so it gets a ready envp for execve.
std::vector<std::string> environment_with(const std::vector<std::string>& extra) {
  std::vector<std::string> out;
  auto overridden = [&](std::string_view entry) {
    const auto name = entry.substr(0, entry.find('=') + 1);
    for (const auto& e : extra)
      if (e.starts_with(name)) return true;
    return false;
  };
  for (char** e = environ; e && *e; ++e)
    if (!overridden(*e)) out.emplace_back(*e);
  out.insert(out.end(), extra.begin(), extra.end());
  return out;
}

std::vector<char*> pointers_to(std::vector<std::string>& words) {
  std::vector<char*> out;
  for (auto& w : words) out.push_back(w.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

std::string ChildFailure::describe() const {
  std::string what = signal != 0 ? fmt::format("rank {} was killed by signal {} ({})", rank, signal,
                                               strsignal(signal))
                                 : fmt::format("rank {} exited with code {}", rank, exit_code);
  if (!log_tail.empty()) what += fmt::format("; last lines of its log:\n{}", log_tail);
  return what;
}

std::filesystem::path self_executable() {
  // /proc/self/exe itself, not the path it links to: a forked child that executes it gets the
  // very image this process runs, even after `ninja` has replaced (unlinked) the file on disk
  // mid-sweep, where the link would read ".../sgp (deleted)" and exec would fail.
  std::error_code ec;
  if (!std::filesystem::exists("/proc/self/exe", ec)) {
    throw IoError(fmt::format("cannot find the running executable (/proc/self/exe): {}",
                              ec ? ec.message() : "missing"));
  }
  return "/proc/self/exe";
}

std::string last_lines(const std::filesystem::path& file, int lines) {
  std::ifstream in(file);
  std::deque<std::string> tail;
  std::string line;
  while (std::getline(in, line)) {
    tail.push_back(line);
    if (static_cast<int>(tail.size()) > lines) tail.pop_front();
  }
  std::string out;
  for (const auto& l : tail) out += "  | " + l + "\n";
  return out;
}

LocalProcesses::LocalProcesses(std::vector<ChildSpec> children, std::filesystem::path executable,
                               std::chrono::milliseconds grace)
    : grace_(grace) {
  // SIGCHLD/SIGINT/SIGTERM are taken synchronously with sigtimedwait from now on; children get
  // the old mask back before exec.
  const sigset_t set = watched_signals();
  pthread_sigmask(SIG_BLOCK, &set, &old_mask_);
  masked_ = true;
  const pid_t parent = getpid();
  for (auto& spec : children) {
    std::vector<std::string> words{executable.string()};
    words.insert(words.end(), spec.args.begin(), spec.args.end());
    std::vector<char*> argv = pointers_to(words);
    std::vector<std::string> env = environment_with(spec.env);
    std::vector<char*> envp = pointers_to(env);
    const int fd = ::open(spec.log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
      const std::string why = std::strerror(errno);
      stop_all();
      throw IoError(fmt::format("cannot create the log file {} of rank {}: {}",
                                spec.log_file.string(), spec.rank, why));
    }
    const pid_t pid = fork();
    if (pid == 0) {
      // Child: only async-signal-safe calls until exec.
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != parent) _exit(126);  // the launcher died already
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
      execve(argv[0], argv.data(), envp.data());
      _exit(127);
    }
    ::close(fd);
    if (pid < 0) {
      const std::string why = std::strerror(errno);
      stop_all();
      throw IoError(fmt::format("cannot start rank {}: {}", spec.rank, why));
    }
    children_.push_back(Child{std::move(spec), pid, false});
  }
}

LocalProcesses::~LocalProcesses() {
  stop_all();
  if (masked_) pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

bool LocalProcesses::all_done() const {
  for (const auto& c : children_) {
    if (!c.done) return false;
  }
  return true;
}

void LocalProcesses::signal_running(int sig) {
  for (const auto& c : children_) {
    if (!c.done) ::kill(c.pid, sig);
  }
}

void LocalProcesses::reap(std::vector<ChildFailure>& failures) {
  for (auto& c : children_) {
    if (c.done) continue;
    int status = 0;
    const pid_t r = waitpid(c.pid, &status, WNOHANG);
    if (r != c.pid) continue;
    c.done = true;
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok) {
      ChildFailure f;
      f.rank = c.spec.rank;
      if (WIFSIGNALED(status)) {
        f.signal = WTERMSIG(status);
      } else {
        f.exit_code = WEXITSTATUS(status);
      }
      f.log_tail = last_lines(c.spec.log_file, 15);
      failures.push_back(f);
    }
  }
}

// SIGTERM, then SIGKILL for those still alive after the grace period; reaps everyone.
void LocalProcesses::stop_all() {
  std::vector<ChildFailure> ignored;
  reap(ignored);
  if (all_done()) return;
  signal_running(SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + grace_;
  while (!all_done() && std::chrono::steady_clock::now() < deadline) {
    wait_signal(std::chrono::milliseconds(100));
    reap(ignored);
  }
  if (all_done()) return;
  signal_running(SIGKILL);
  for (auto& c : children_) {
    if (c.done) continue;
    int status = 0;
    waitpid(c.pid, &status, 0);
    c.done = true;
  }
}

void LocalProcesses::forward_signals() {
  const int sig = wait_signal(std::chrono::milliseconds(1000));
  if (sig == SIGINT || sig == SIGTERM) {
    if (!interrupted_) spdlog::warn("signal {}: stopping every peer", strsignal(sig));
    interrupted_ = sig;
    signal_running(sig);
  }
}

std::optional<ChildFailure> LocalProcesses::wait() {
  std::vector<ChildFailure> failures;
  while (!all_done()) {
    forward_signals();
    reap(failures);
    if (!failures.empty()) {
      stop_all();
      return failures.front();
    }
  }
  return std::nullopt;
}

std::vector<ChildFailure> LocalProcesses::wait_for_all() {
  std::vector<ChildFailure> failures;
  while (!all_done()) {
    forward_signals();
    const std::size_t before = failures.size();
    reap(failures);
    for (std::size_t i = before; i < failures.size(); ++i) {
      spdlog::warn("{}\nthe other peers go on", failures[i].describe());
    }
  }
  return failures;
}

}  // namespace sgp::launch
