#pragma once
// One small error hierarchy for the whole project:
//   InputError     bad user input (file, flag, config); the message names where and what.
//   IoError        recoverable I/O trouble: a peer gone, a time-out, a bad message.
//   InvariantError a broken internal invariant (SGP_ENFORCE): a bug, not the user's fault.
//   Interrupted    stopped by the user (Ctrl-C, SIGTERM): exit 128 + signal.
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace sgp {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class InputError : public Error {
 public:
  using Error::Error;
};

class IoError : public Error {
 public:
  using Error::Error;
};

class InvariantError : public Error {
 public:
  using Error::Error;
};

// The user stopped a command with a signal (Ctrl-C: SIGINT); `sgp` exits 128 + signal, as a
// shell reports a process killed by it.
class Interrupted : public Error {
 public:
  Interrupted(int signal, const std::string& what) : Error(what), signal_(signal) {}
  int signal() const { return signal_; }

 private:
  int signal_;
};

namespace detail {
[[noreturn]] inline void enforce_failed(const char* file, int line, const char* condition,
                                        const std::string& message) {
  throw InvariantError(fmt::format("{}:{}: check '{}' failed: {}", file, line, condition, message));
}
}  // namespace detail

}  // namespace sgp

// SGP_ENFORCE(cond, "format {}", args...): throws sgp::InvariantError with file:line.
#define SGP_ENFORCE(cond, ...)                                                            \
  do {                                                                                    \
    if (!(cond))                                                                          \
      ::sgp::detail::enforce_failed(__FILE__, __LINE__, #cond, fmt::format(__VA_ARGS__)); \
  } while (false)
