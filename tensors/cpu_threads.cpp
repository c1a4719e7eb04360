// Per-thread product thread count (cpu_threads.h). The products read it before each call.
#include "tensors/cpu_threads.h"

#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>

#include "tensors/knobs.h"

namespace tensorplay {
namespace {

int environment_threads() {
  static const int value = [] {
    if (const int64_t n = knob_int(Knob::NumThreads); n > 0) return static_cast<int>(n);
    unsigned hw = std::thread::hardware_concurrency();
    return hw == 0 ? 1 : static_cast<int>(hw);
  }();
  return value;
}

std::atomic<int> process_default{0};  // 0: not set, use the environment's
thread_local int thread_count = 0;    // 0: not set on this thread

int default_threads() {
  int n = process_default.load(std::memory_order_relaxed);
  return n > 0 ? n : environment_threads();
}

void check_count(const char* what, int n) {
  if (n < 1)
    throw std::invalid_argument(std::string(what) + ": needs at least 1 thread, got " +
                                std::to_string(n));
}

}  // namespace

void set_num_threads(int n) {
  check_count("set_num_threads", n);
  thread_count = n;
}

void set_default_num_threads(int n) {
  check_count("set_default_num_threads", n);
  process_default.store(n, std::memory_order_relaxed);
}

int get_num_threads() { return thread_count > 0 ? thread_count : default_threads(); }

}  // namespace tensorplay
