// The process's count of computing threads.
#include "tensorplay/base/compute_activity.h"

#include <atomic>

namespace tensorplay::inline base {
namespace {
std::atomic<int> computing{0};
}  // namespace

ComputeScope::ComputeScope() { computing.fetch_add(1, std::memory_order_relaxed); }
ComputeScope::~ComputeScope() { computing.fetch_sub(1, std::memory_order_relaxed); }

int threads_computing() { return computing.load(std::memory_order_relaxed); }

}  // namespace tensorplay::inline base
