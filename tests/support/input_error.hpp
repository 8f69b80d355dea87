#pragma once
// The message of the InputError a piece of code throws, for tests of error messages.
#include <string>

#include "sgp/error.hpp"

namespace sgp::testing {

// What `fn` throws as an InputError, or "" when it throws none.
template <class Fn>
std::string input_error_of(Fn&& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace sgp::testing
