// Catch2 entry point shared by every test executable.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace {

// Catch2 v2's assertions (CHECK, REQUIRE, FAIL, ...) are not thread-safe: one made on a thread
// other than the tests' own races on Catch's counters and state, and can crash a run. A test's
// threads record what they saw (values, or error strings) and the test's thread asserts on it once
// they are joined. An assertion made elsewhere stops the run at once, naming where it is, rather
// than racing unnoticed outside a ThreadSanitizer run.
class AssertionsOnTheTestThread : public Catch::TestEventListenerBase {
 public:
  explicit AssertionsOnTheTestThread(const Catch::ReporterConfig& config)
      : TestEventListenerBase(config), test_thread_(std::this_thread::get_id()) {}

  void assertionStarting(const Catch::AssertionInfo& info) override {
    if (std::this_thread::get_id() == test_thread_) return;
    std::fprintf(stderr,
                 "%s:%zu: %s(%s) ran on a thread other than the test's; Catch2's assertions are "
                 "not thread-safe: record what the thread saw and assert after joining it\n",
                 info.lineInfo.file, info.lineInfo.line, std::string(info.macroName).c_str(),
                 std::string(info.capturedExpression).c_str());
    std::fflush(stderr);
    std::abort();
  }

 private:
  const std::thread::id test_thread_;
};

}  // namespace

CATCH_REGISTER_LISTENER(AssertionsOnTheTestThread)
