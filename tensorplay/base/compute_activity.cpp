// The process's counts of computing threads and of ranks inside a step.
#include "tensorplay/base/compute_activity.h"

#include <atomic>

namespace tensorplay::inline base {
namespace {
std::atomic<int> computing{0};
std::atomic<int> in_step{0};
}  // namespace

ComputeScope::ComputeScope() { computing.fetch_add(1, std::memory_order_relaxed); }
ComputeScope::~ComputeScope() { computing.fetch_sub(1, std::memory_order_relaxed); }

int threads_computing() { return computing.load(std::memory_order_relaxed); }

StepScope::StepScope() { in_step.fetch_add(1, std::memory_order_relaxed); }
StepScope::~StepScope() { in_step.fetch_sub(1, std::memory_order_relaxed); }

int ranks_in_step() { return in_step.load(std::memory_order_relaxed); }

}  // namespace tensorplay::inline base
