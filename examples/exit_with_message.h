// How the examples end on an error: the program's name and the error's message on standard error
// and exit status 1, instead of std::terminate's abort on an uncaught exception.
#pragma once

#include <cstdio>
#include <exception>
#include <functional>

namespace examples {

/// Runs `body` (the program's work) and returns its status. An exception escaping it is printed
/// as "<program>: <message>" on standard error, and the status is then 1.
inline int exit_with_message(const char* program, const std::function<int()>& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
  } catch (...) {
    std::fprintf(stderr, "%s: an exception of a type other than std::exception\n", program);
  }
  std::fflush(stderr);
  return 1;
}

}  // namespace examples
