// Per-thread product thread count (cpu_threads.h). The products read it before each call.
#include "tensors/cpu_threads.h"

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

namespace tensorplay {
namespace {

int default_threads() {
  static const int value = [] {
    if (const char* env = std::getenv("TENSORPLAY_NUM_THREADS"); env && *env) {
      char* end = nullptr;
      long n = std::strtol(env, &end, 10);
      if (*end != '\0' || n < 1 || n > 4096)
        throw std::invalid_argument(
            std::string("TENSORPLAY_NUM_THREADS=") + env +
            ": expected a thread count >= 1, e.g. TENSORPLAY_NUM_THREADS=1");
      return static_cast<int>(n);
    }
    unsigned hw = std::thread::hardware_concurrency();
    return hw == 0 ? 1 : static_cast<int>(hw);
  }();
  return value;
}

thread_local int thread_count = 0;  // 0: not set on this thread

}  // namespace

void set_num_threads(int n) {
  if (n < 1)
    throw std::invalid_argument("set_num_threads: needs at least 1 thread, got " +
                                std::to_string(n));
  thread_count = n;
}

int get_num_threads() { return thread_count > 0 ? thread_count : default_threads(); }

}  // namespace tensorplay
