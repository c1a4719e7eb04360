// Per-thread product thread count (cpu_threads.h). The products read it before each call.
#include "tensorplay/core/cpu_threads.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>

#include "tensorplay/base/knobs.h"
#include "tensorplay/core/core_knobs.h"

namespace tensorplay {
namespace {

int hardware_threads() {
  static const int value = [] {
    unsigned hw = std::thread::hardware_concurrency();
    return hw == 0 ? 1 : static_cast<int>(hw);
  }();
  return value;
}

// TENSORPLAY_NUM_THREADS, or 0 when unset (or 0: the share rule then applies).
int environment_threads() {
  static const int value = static_cast<int>(knob_int(kNumThreadsKnob));
  return value;
}

std::atomic<int> process_default{0};   // 0: not set, use the environment's
std::atomic<int> ranks_on_host{1};     // processes of the job on this host
thread_local int thread_count = 0;     // 0: not set on this thread
thread_local int compute_threads = 1;  // threads of this process computing at once

int default_threads() {
  if (int n = process_default.load(std::memory_order_relaxed); n > 0) return n;
  if (int n = environment_threads(); n > 0) return n;
  return thread_share(hardware_threads(), ranks_on_host.load(std::memory_order_relaxed),
                      compute_threads);
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

void reset_default_num_threads() { process_default.store(0, std::memory_order_relaxed); }

int get_num_threads() { return thread_count > 0 ? thread_count : default_threads(); }

int thread_share(int cores, int ranks_on_host, int compute_threads) {
  const int64_t sharers =
      static_cast<int64_t>(std::max(ranks_on_host, 1)) * std::max(compute_threads, 1);
  return static_cast<int>(std::max<int64_t>(1, std::max(cores, 1) / sharers));
}

namespace {
int process_cores() {
  int cores = hardware_threads();
#ifdef __linux__
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) cores = std::max(1, CPU_COUNT(&set));
#endif
  return cores;
}
}  // namespace

int cores_per_rank() {
  return thread_share(process_cores(), ranks_on_host.load(std::memory_order_relaxed), 1);
}

bool host_oversubscribed() {
  return ranks_on_host.load(std::memory_order_relaxed) > process_cores();
}

void set_ranks_on_host(int ranks) {
  if (ranks < 1)
    throw std::invalid_argument("set_ranks_on_host: needs at least 1 rank, got " +
                                std::to_string(ranks));
  ranks_on_host.store(ranks, std::memory_order_relaxed);
}

void set_compute_threads(int n) {
  check_count("set_compute_threads", n);
  compute_threads = n;
}

}  // namespace tensorplay
