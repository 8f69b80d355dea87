#pragma once
// Runs N child processes of the `sgp` binary on this host (for `--local` commands): each child's
// stdout and stderr go through a pipe to its own log file, and its last lines are kept in memory
// too, so that a failure is reported with its cause even when the log cannot be written (a full
// disk); SIGINT/SIGTERM sent to this process are forwarded to
// the children; the first child that fails (non-zero exit or a signal) is reported with its rank,
// exit code or signal and the last lines of its log, and the others are stopped. No orphans: the
// children die with the launcher (PR_SET_PDEATHSIG) and every child is reaped before wait()
// returns or the destructor ends.
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <signal.h>
#include <sys/types.h>

namespace sgp::launch {

struct ChildSpec {
  int rank = 0;
  std::vector<std::string> args;  // after the executable, e.g. {"consensus", "--rank", "2", ...}
  std::filesystem::path log_file;
  // NAME=VALUE set in the child's environment over this process's (sgp launch -- COMMAND).
  std::vector<std::string> env = {};
  // A descriptor the child inherits (its FD_CLOEXEC cleared in the child only), e.g. the socket
  // its peer listens on (handed_listener.hpp); -1: none. Every other descriptor is closed at exec.
  int inherited_fd = -1;
};

struct ChildFailure {
  int rank = 0;
  int exit_code = -1;     // -1 when killed by a signal
  int signal = 0;         // 0 when it exited
  std::string log_tail;   // its last lines of output, each "  | LINE\n"
  std::string log_error;  // why its log file could not be written, if it could not
  // "rank 2 exited with code 3" / "rank 2 was killed by signal 9 (Killed)", then the log tail.
  std::string describe() const;
};

// The running executable: the path /proc/self/exe (which still works after the file on disk was
// replaced by a rebuild).
std::filesystem::path self_executable();

// The last `lines` lines of a text file ("" when it cannot be read).
std::string last_lines(const std::filesystem::path& file, int lines);

// SIGINT, SIGTERM and SIGCHLD blocked in the calling thread while it lives, and so in every thread
// started meanwhile (a thread inherits its creator's mask); one that lands on a thread started
// before (OpenBLAS's) is passed on to the calling thread. A Ctrl-C that comes before the children
// run stays pending for LocalProcesses, which then starts none and reports it, or for
// take_pending() after them, instead of killing the process before it has cleaned up.
// One at a time, in the thread that then runs LocalProcesses.
class HeldSignals {
 public:
  HeldSignals();
  // Drops a signal still pending (the caller took it, or is failing with an error of its own:
  // let through, it would kill the process) and restores the mask.
  ~HeldSignals();
  HeldSignals(const HeldSignals&) = delete;
  HeldSignals& operator=(const HeldSignals&) = delete;

  // SIGINT or SIGTERM received and not taken yet (now taken), or 0.
  int take_pending();

 private:
  sigset_t old_mask_{};
  struct sigaction old_actions_[2] = {};  // SIGINT's and SIGTERM's
};

class LocalProcesses {
 public:
  // Starts every child at once, or none when a SIGINT/SIGTERM is pending already (interrupted()
  // says which; held by HeldSignals). Each child gets SIGINT/SIGTERM unblocked. Throws IoError (and
  // stops the ones started) if one cannot be started or its log file cannot be created.
  LocalProcesses(std::vector<ChildSpec> children,
                 std::filesystem::path executable = self_executable(),
                 std::chrono::milliseconds grace = std::chrono::seconds(5));
  // Stops (SIGTERM, then SIGKILL after the grace period) and reaps any child still running.
  ~LocalProcesses();
  LocalProcesses(const LocalProcesses&) = delete;
  LocalProcesses& operator=(const LocalProcesses&) = delete;

  // Waits for every child. Returns nothing when all exited with 0; otherwise the first failure
  // (the others are stopped). A SIGINT/SIGTERM received meanwhile is forwarded to the children;
  // `interrupted()` then tells which signal.
  std::optional<ChildFailure> wait();
  // Waits for every child without stopping any: every failure, in the order they happened.
  std::vector<ChildFailure> wait_for_all();
  int interrupted() const { return interrupted_; }

 private:
  struct Output;  // the pipe from a child, its log file and its last lines
  struct Child {
    ChildSpec spec;
    pid_t pid = -1;
    bool done = false;
    std::shared_ptr<Output> output;
  };
  void start(ChildSpec spec, const std::filesystem::path& executable);
  int wait_signal(std::chrono::milliseconds timeout);
  void reap(std::vector<ChildFailure>& failures);
  void forward_signals();
  void signal_running(int sig);
  void stop_all();
  bool all_done() const;

  std::vector<Child> children_;
  std::chrono::milliseconds grace_;
  int interrupted_ = 0;
  int signal_fd_ = -1;
  bool masked_ = false;
  sigset_t old_mask_{};
  sigset_t child_mask_{};  // old_mask_ without the signals that stop a child
};

}  // namespace sgp::launch
