#include "sgp/launch/local_processes.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "sgp/error.hpp"
#include "sgp/run/run_directory.hpp"

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

constexpr int kTailLines = 15;

std::string tail_text(const std::deque<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += "  | " + l + "\n";
  return out;
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
  if (!log_error.empty()) what += fmt::format("; its log could not be written ({})", log_error);
  if (!log_tail.empty()) what += fmt::format("; last lines of its output:\n{}", log_tail);
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
  return tail_text(tail);
}

// What a child writes to stdout and stderr: read from its pipe, written to its log file, and its
// last lines kept here, for the failure report when the log is on a full disk.
struct LocalProcesses::Output {
  int pipe_fd = -1;  // the read end, non-blocking; -1 once the child closed its end
  int log_fd = -1;
  std::string partial;  // the start of a line not ended yet
  std::deque<std::string> lines;
  std::string log_error;  // the first failed write to the log, if any

  Output(int pipe, int log) : pipe_fd(pipe), log_fd(log) {}
  ~Output() {
    if (pipe_fd >= 0) ::close(pipe_fd);
    if (log_fd >= 0) ::close(log_fd);
  }
  Output(const Output&) = delete;
  Output& operator=(const Output&) = delete;

  // Relays what the pipe holds now; closes it at its end.
  void relay() {
    char buffer[65536];
    while (pipe_fd >= 0) {
      const ssize_t n = ::read(pipe_fd, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return;
      if (n <= 0) {  // the end (or a broken pipe): keep the unfinished line too
        ::close(pipe_fd);
        pipe_fd = -1;
        if (!partial.empty()) keep_line(std::exchange(partial, {}));
        return;
      }
      write_log(buffer, static_cast<std::size_t>(n));
      keep_lines(std::string_view(buffer, static_cast<std::size_t>(n)));
    }
  }

 private:
  void write_log(const char* data, std::size_t size) {
    while (log_error.empty() && size > 0) {
      const ssize_t n = ::write(log_fd, data, size);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        log_error = run::errno_text(errno);
        return;
      }
      data += n;
      size -= static_cast<std::size_t>(n);
    }
  }
  void keep_lines(std::string_view bytes) {
    for (std::size_t end; (end = bytes.find('\n')) != std::string_view::npos;) {
      partial.append(bytes.substr(0, end));
      keep_line(std::exchange(partial, {}));
      bytes.remove_prefix(end + 1);
    }
    partial.append(bytes);
    if (partial.size() > 4096) keep_line(std::exchange(partial, {}));  // no unbounded line
  }
  void keep_line(std::string line) {
    lines.push_back(std::move(line));
    if (static_cast<int>(lines.size()) > kTailLines) lines.pop_front();
  }
};

namespace {

constexpr int kStopSignals[] = {SIGINT, SIGTERM};

// The thread of the live HeldSignals (one at a time).
std::atomic<pid_t> holder_pid{0};
std::atomic<pid_t> holder_tid{0};

// Runs on a thread started before the hold, which does not block the signal (OpenBLAS starts
// one when the library loads, before main): passes the signal on to the holding thread, where it
// stays pending. In a child forked meanwhile (before its exec), does what the default would.
void pass_to_holder(int sig) {
  const int saved_errno = errno;
  if (::getpid() == holder_pid.load()) {
    ::tgkill(holder_pid.load(), holder_tid.load(), sig);
  } else {
    ::signal(sig, SIG_DFL);
    ::raise(sig);
  }
  errno = saved_errno;
}

}  // namespace

HeldSignals::HeldSignals() {
  const sigset_t set = watched_signals();
  pthread_sigmask(SIG_BLOCK, &set, &old_mask_);
  holder_pid.store(::getpid());
  holder_tid.store(::gettid());
  struct sigaction pass {};
  pass.sa_handler = pass_to_holder;
  sigemptyset(&pass.sa_mask);
  pass.sa_flags = SA_RESTART;
  for (std::size_t i = 0; i < std::size(kStopSignals); ++i) {
    sigaction(kStopSignals[i], nullptr, &old_actions_[i]);
    // An ignored signal (a background job's SIGINT) stays ignored, for the children too.
    if (old_actions_[i].sa_handler != SIG_IGN) sigaction(kStopSignals[i], &pass, nullptr);
  }
}

HeldSignals::~HeldSignals() {
  while (take_pending() != 0) {
  }
  for (std::size_t i = 0; i < std::size(kStopSignals); ++i)
    sigaction(kStopSignals[i], &old_actions_[i], nullptr);
  pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

int HeldSignals::take_pending() {
  sigset_t stops;
  sigemptyset(&stops);
  for (int sig : kStopSignals) sigaddset(&stops, sig);
  const timespec now{0, 0};
  const int sig = ::sigtimedwait(&stops, nullptr, &now);
  return sig > 0 ? sig : 0;
}

LocalProcesses::LocalProcesses(std::vector<ChildSpec> children, std::filesystem::path executable,
                               std::chrono::milliseconds grace)
    : grace_(grace) {
  // SIGCHLD/SIGINT/SIGTERM are taken synchronously through signal_fd_ from now on. Children get
  // the old mask back before exec, but never with the signals that stop them blocked (a caller
  // holding them with HeldSignals holds them for itself only).
  const sigset_t set = watched_signals();
  pthread_sigmask(SIG_BLOCK, &set, &old_mask_);
  masked_ = true;
  child_mask_ = old_mask_;
  for (int sig : {SIGCHLD, SIGINT, SIGTERM}) sigdelset(&child_mask_, sig);
  signal_fd_ = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signal_fd_ < 0) throw IoError(fmt::format("signalfd: {}", run::errno_text(errno)));
  // Interrupted before they start (a Ctrl-C held while the caller prepared them): start none.
  sigset_t pending;
  sigpending(&pending);
  if (sigismember(&pending, SIGINT) || sigismember(&pending, SIGTERM)) {
    while (!interrupted_) forward_signals();  // past a SIGCHLD read first, if any
    return;
  }
  for (auto& spec : children) start(std::move(spec), executable);
}

// Starts one child, its output going into a pipe to this process.
void LocalProcesses::start(ChildSpec spec, const std::filesystem::path& executable) {
  const pid_t parent = getpid();
  std::vector<std::string> words{executable.string()};
  words.insert(words.end(), spec.args.begin(), spec.args.end());
  std::vector<char*> argv = pointers_to(words);
  std::vector<std::string> env = environment_with(spec.env);
  std::vector<char*> envp = pointers_to(env);
  const int log = ::open(spec.log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int ends[2] = {-1, -1};
  if (log < 0 || ::pipe2(ends, O_CLOEXEC) != 0) {
    const std::string why = run::errno_text(errno);
    if (log >= 0) ::close(log);
    stop_all();
    throw IoError(fmt::format("cannot create the log file {} of rank {}: {}",
                              spec.log_file.string(), spec.rank, why));
  }
  auto output = std::make_shared<Output>(ends[0], log);
  ::fcntl(ends[0], F_SETFL, O_NONBLOCK);
  const pid_t pid = fork();
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(126);  // the launcher died already
    dup2(ends[1], STDOUT_FILENO);
    dup2(ends[1], STDERR_FILENO);
    if (spec.inherited_fd >= 0) fcntl(spec.inherited_fd, F_SETFD, 0);
    pthread_sigmask(SIG_SETMASK, &child_mask_, nullptr);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  ::close(ends[1]);
  if (pid < 0) {
    const std::string why = std::strerror(errno);
    stop_all();
    throw IoError(fmt::format("cannot start rank {}: {}", spec.rank, why));
  }
  children_.push_back(Child{std::move(spec), pid, false, std::move(output)});
}

LocalProcesses::~LocalProcesses() {
  stop_all();
  if (signal_fd_ >= 0) ::close(signal_fd_);
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
    c.output->relay();  // what it wrote last
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok) {
      ChildFailure f;
      f.rank = c.spec.rank;
      if (WIFSIGNALED(status)) {
        f.signal = WTERMSIG(status);
      } else {
        f.exit_code = WEXITSTATUS(status);
      }
      f.log_tail = tail_text(c.output->lines);
      f.log_error = c.output->log_error;
      failures.push_back(f);
    }
  }
}

// Waits up to `timeout` for one of the watched signals, relaying the children's output meanwhile;
// returns the signal, or 0 on time-out.
int LocalProcesses::wait_signal(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::vector<pollfd> fds = {{signal_fd_, POLLIN, 0}};
    std::vector<Output*> outputs;
    for (auto& c : children_) {
      if (c.output->pipe_fd < 0) continue;
      fds.push_back({c.output->pipe_fd, POLLIN, 0});
      outputs.push_back(c.output.get());
    }
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    ::poll(fds.data(), fds.size(), static_cast<int>(std::max<std::int64_t>(0, left.count())));
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents != 0) outputs[i - 1]->relay();
    }
    signalfd_siginfo info{};
    if ((fds[0].revents & POLLIN) && ::read(signal_fd_, &info, sizeof info) == sizeof info) {
      return static_cast<int>(info.ssi_signo);
    }
    if (std::chrono::steady_clock::now() >= deadline) return 0;
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
