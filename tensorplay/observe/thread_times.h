// Where a process's threads spent a stretch of time: CPU time, and time runnable but waiting for
// a core (the run queue), per thread, from the kernel's scheduler statistics.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tensorplay::pipelining {

/// One thread's scheduler figures at one instant (or their change over a stretch of time).
struct ThreadTimes {
  int tid = 0;
  std::string name;         ///< the thread's name (`comm`), e.g. "ucx-progress"
  int64_t cpu_ns = 0;       ///< time on a core
  int64_t runnable_ns = 0;  ///< time runnable but waiting for a core
  int64_t slices = 0;       ///< times it was put on a core
};

/// Linux's `/proc/<pid>/task/<tid>/schedstat` line ("cpu_ns runnable_ns slices") read into
/// `out`; false when the text does not hold three numbers.
bool parse_schedstat(const std::string& text, ThreadTimes& out);

/// The calling thread's figures (its own schedstat); `tid` 0 when the kernel keeps no scheduler
/// statistics (CONFIG_SCHED_INFO off, or not Linux).
ThreadTimes this_thread_times();

/// Every thread of this process, by thread id; empty when the kernel keeps no statistics.
std::vector<ThreadTimes> process_thread_times();

/// What each thread of `after` did since `before` (threads matched by id; one that started
/// meanwhile counts from zero), most CPU time first.
std::vector<ThreadTimes> thread_times_since(const std::vector<ThreadTimes>& before,
                                            const std::vector<ThreadTimes>& after);

/// The same figures summed by thread name, most CPU time first (the `tid` of a sum is its
/// busiest thread's).
std::vector<ThreadTimes> sum_by_name(const std::vector<ThreadTimes>& threads);

/// A JSON array of `threads`: `[{"name":"...","threads":N,"cpu_ms":..,"runnable_ms":..},...]`
/// after sum_by_name, for the benchmarks' lines.
std::string thread_times_json(const std::vector<ThreadTimes>& threads);

}  // namespace tensorplay::pipelining
