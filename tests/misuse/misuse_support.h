// Helpers of the misuse suite: run a call with a time bound and check that it fails with the
// expected exception type and words, and run a command-line tool with a time bound.
#pragma once

#include <sys/wait.h>

#include <array>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <typeinfo>
#include <utility>
#include <vector>

namespace misuse {

/// Default bound on one misuse case: every error must come at once, never after a long wait.
constexpr std::chrono::seconds kBound{10};

/// How much longer a timed case may take under ThreadSanitizer, which runs code several times
/// slower (a 220 ms bound missed by 3 ms at a load of 10): that build looks for races, the
/// normal build checks the timings.
#if defined(__SANITIZE_THREAD__)
constexpr int kSanitizerSlowdown = 5;
#else
constexpr int kSanitizerSlowdown = 1;
#endif

/// Runs `call` on its own thread and waits at most `bound`; returns the exception it threw (null
/// when it returned). A call still running after `bound` fails the test; its thread is left
/// behind (detached) so the suite goes on and the process exit ends it. `call` makes no Catch2
/// assertion (they are not thread-safe): it hands what it saw to the caller (through values it
/// owns a share of, since a late thread outlives the test) or throws.
inline std::exception_ptr run_bounded(const std::function<void()>& call,
                                      std::chrono::seconds bound = kBound) {
  auto done = std::make_shared<std::promise<std::exception_ptr>>();
  std::future<std::exception_ptr> result = done->get_future();
  std::thread([call, done] {
    std::exception_ptr error;
    try {
      call();
    } catch (...) {
      error = std::current_exception();
    }
    // Handed over after the handler has ended, as the only reference: the exception is freed by
    // the caller's thread, never by this one while the caller reads it.
    done->set_value(std::move(error));
  }).detach();
  if (result.wait_for(bound) != std::future_status::ready) {
    FAIL("the call did not finish within " << bound.count() << " s (a hang)");
  }
  return result.get();
}

/// Checks that `call` throws an `E` (or a type derived from it) within `bound`, whose message
/// holds every one of `words`; returns that message, for further checks. `call` runs on a thread
/// of its own (run_bounded).
template <typename E>
std::string expect_error(const std::function<void()>& call, const std::vector<std::string>& words,
                         std::chrono::seconds bound = kBound) {
  std::exception_ptr error = run_bounded(call, bound);
  if (!error) FAIL("expected an error, but the call succeeded");
  try {
    std::rethrow_exception(error);
  } catch (const E& e) {
    std::string message = e.what();
    INFO("error: " << message);
    for (const std::string& word : words) {
      INFO("expected the words '" << word << "'");
      CHECK(message.find(word) != std::string::npos);
    }
    return message;
  } catch (const std::exception& e) {
    FAIL("expected " << typeid(E).name() << ", got " << typeid(e).name() << ": " << e.what());
  } catch (...) {
    FAIL("expected " << typeid(E).name() << ", got a non-standard exception");
  }
  return {};  // not reached: FAIL ends the test case
}

/// What a tool printed (standard output and error together) and its exit status.
struct ToolResult {
  int status = -1;
  std::string output;
};

/// Runs `command` through the shell under `timeout` (a hang is killed and shows as status 124).
inline ToolResult run_tool(const std::string& command, int timeout_seconds = 20) {
  std::string line = "timeout " + std::to_string(timeout_seconds) + " " + command + " 2>&1";
  ToolResult result;
  FILE* pipe = ::popen(line.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    result.output.append(buffer.data(), n);
  int raw = ::pclose(pipe);
  result.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  return result;
}

}  // namespace misuse
