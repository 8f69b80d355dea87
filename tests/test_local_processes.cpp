// The local process launcher (`--local`): children's output lands in their log files, the first
// failure is reported with rank, exit code or signal and log tail, the rest are stopped, and no
// child outlives wait().
#include <doctest/doctest.h>

#include <signal.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <unistd.h>

#include "sgp/launch/local_processes.hpp"
#include "support/temp_dir.hpp"
#include "support/text.hpp"

using sgp::launch::ChildSpec;
using sgp::launch::LocalProcesses;
using sgp::testing::slurp;

namespace {

ChildSpec shell(int rank, const std::string& script, const sgp::testing::TempDir& dir) {
  return ChildSpec{rank, {"-c", script}, dir / ("child-" + std::to_string(rank) + ".log")};
}

}  // namespace

TEST_CASE("all children succeed: logs written, nothing reported") {
  sgp::testing::TempDir dir;
  std::vector<ChildSpec> children;
  for (int r = 0; r < 3; ++r) children.push_back(shell(r, "echo out $0; echo err >&2", dir));
  LocalProcesses p(children, "/bin/sh");
  CHECK_FALSE(p.wait().has_value());
  CHECK(slurp(dir / "child-1.log") == "out /bin/sh\nerr\n");
}

TEST_CASE("a failing child is reported with rank, code and log tail; the others are stopped") {
  sgp::testing::TempDir dir;
  const auto start = std::chrono::steady_clock::now();
  LocalProcesses p({shell(0, "exec sleep 60", dir),
                    shell(1,
                          "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do "
                          "echo line $i; done; exit 3",
                          dir),
                    shell(2, "exec sleep 60", dir)},
                   "/bin/sh", std::chrono::milliseconds(2000));
  const auto failure = p.wait();
  REQUIRE(failure.has_value());
  CHECK(failure->rank == 1);
  CHECK(failure->exit_code == 3);
  CHECK(failure->signal == 0);
  CHECK(failure->log_tail.find("line 20") != std::string::npos);
  CHECK(failure->log_tail.find("line 5\n") == std::string::npos);  // only the last lines
  CHECK(failure->describe().find("rank 1 exited with code 3") == 0);
  // The sleepers were stopped, not waited for (60 s).
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));
}

TEST_CASE("a child whose log cannot be written (full disk) is reported with its last lines") {
  sgp::testing::TempDir dir;
  // /dev/full fails every write with ENOSPC, as a log on a full disk does.
  LocalProcesses p(
      {ChildSpec{
          2, {"-c", "echo starting; echo 'cannot write x: disk full' >&2; exit 3"}, "/dev/full"}},
      "/bin/sh");
  const auto failure = p.wait();
  REQUIRE(failure.has_value());
  CHECK(failure->rank == 2);
  CHECK(failure->log_error == "No space left on device (ENOSPC)");
  CHECK(failure->log_tail == "  | starting\n  | cannot write x: disk full\n");
  CHECK(failure->describe() ==
        "rank 2 exited with code 3; its log could not be written (No space left on device "
        "(ENOSPC)); last lines of its output:\n  | starting\n  | cannot write x: disk full\n");
}

TEST_CASE("a child killed by a signal is reported with the signal") {
  sgp::testing::TempDir dir;
  LocalProcesses p({shell(4, "kill -9 $$", dir)}, "/bin/sh");
  const auto failure = p.wait();
  REQUIRE(failure.has_value());
  CHECK(failure->rank == 4);
  CHECK(failure->signal == SIGKILL);
  CHECK(failure->describe().find("rank 4 was killed by signal 9") == 0);
}

TEST_CASE("a program that cannot be executed is reported as exit code 127") {
  sgp::testing::TempDir dir;
  LocalProcesses p({ChildSpec{0, {}, dir / "x.log"}}, dir / "no-such-program");
  const auto failure = p.wait();
  REQUIRE(failure.has_value());
  CHECK(failure->exit_code == 127);
}

TEST_CASE("SIGTERM to the launcher is forwarded: every child stops, wait() says so") {
  sgp::testing::TempDir dir;
  const auto start = std::chrono::steady_clock::now();
  LocalProcesses p({shell(0, "exec sleep 60", dir), shell(1, "exec sleep 60", dir)}, "/bin/sh");
  // Started after LocalProcesses blocked the signal, this thread inherits the mask: the signal
  // stays pending for the launcher's wait() instead of killing the test.
  std::thread sender([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ::kill(::getpid(), SIGTERM);
  });
  const auto failure = p.wait();
  sender.join();
  CHECK(p.interrupted() == SIGTERM);
  REQUIRE(failure.has_value());
  CHECK(failure->signal == SIGTERM);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));
}

TEST_CASE("a Ctrl-C held before the children start: none starts, interrupted() says so") {
  sgp::testing::TempDir dir;
  sgp::launch::HeldSignals held;
  ::kill(::getpid(), SIGINT);  // pending, not fatal: held
  LocalProcesses p({shell(0, "echo started", dir)}, "/bin/sh");
  CHECK_FALSE(p.wait().has_value());
  CHECK(p.interrupted() == SIGINT);
  CHECK_FALSE(std::filesystem::exists(dir / "child-0.log"));
  CHECK(held.take_pending() == 0);  // LocalProcesses took it
}

TEST_CASE("children started while the launcher holds SIGINT/SIGTERM get them unblocked") {
  sgp::testing::TempDir dir;
  sgp::launch::HeldSignals held;
  // grep, not sh (dash clears its mask): the child's own mask, as exec gave it.
  LocalProcesses p({ChildSpec{0, {"SigBlk", "/proc/self/status"}, dir / "child-0.log"}},
                   "/bin/grep");
  CHECK_FALSE(p.wait().has_value());
  const std::string line = slurp(dir / "child-0.log");
  INFO(line);
  REQUIRE(line.starts_with("SigBlk:"));
  const auto mask = std::stoull(line.substr(line.find(':') + 1), nullptr, 16);
  CHECK((mask & ((1ULL << (SIGINT - 1)) | (1ULL << (SIGTERM - 1)))) == 0);
}

TEST_CASE("a signal held and not taken is dropped, not let through, when the hold ends") {
  {
    sgp::launch::HeldSignals held;
    ::kill(::getpid(), SIGTERM);
  }
  sgp::launch::HeldSignals again;
  CHECK(again.take_pending() == 0);  // and this process is still alive
}

TEST_CASE("a Ctrl-C that lands on a thread started before the hold is passed on, not fatal") {
  std::atomic<bool> stop{false};
  // Started before the hold, as OpenBLAS's thread is: SIGINT is not blocked there.
  std::thread early([&] {
    while (!stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  });
  int taken = 0;
  {
    sgp::launch::HeldSignals held;
    ::pthread_kill(early.native_handle(), SIGINT);
    for (int i = 0; i < 500 && taken == 0; ++i) {
      taken = held.take_pending();
      if (taken == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  stop.store(true);
  early.join();
  CHECK(taken == SIGINT);
}
