#pragma once
// One small error hierarchy for the whole project:
//   InputError     bad user input (file, flag, config); the message names where and what.
//   IoError        recoverable I/O trouble: a peer gone, a time-out, a bad message.
//   InvariantError a broken internal invariant (SGP_ENFORCE): a bug, not the user's fault.
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
