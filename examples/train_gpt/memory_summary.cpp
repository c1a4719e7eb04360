// MemorySummary: per-rank maxima over steps, summed across processes (each rank is measured by
// one process only, the others contribute zeros).
#include "memory_summary.h"

#include <algorithm>
#include <cstdio>

#include "tensorplay/tensor.h"

namespace train_gpt {
namespace {

double mib(double bytes) { return bytes / (1024.0 * 1024.0); }

}  // namespace

void MemorySummary::add(const tensorplay::pipelining::MemoryStats& stats) {
  for (const auto& r : stats.ranks) {
    if (r.rank >= static_cast<int>(ranks_.size())) ranks_.resize(r.rank + 1);
    Rank& k = ranks_[r.rank];
    k.peak = std::max(k.peak, static_cast<double>(r.peak_bytes));
    k.activations = std::max(k.activations, static_cast<double>(r.peak_activation_bytes));
    k.parameters = static_cast<double>(r.parameter_bytes);
    k.optimizer = static_cast<double>(r.optimizer_bytes);
  }
}

void MemorySummary::share(const tensorplay::distributed::ProcessGroup* group, int ranks) {
  ranks_.resize(std::max<size_t>(ranks_.size(), static_cast<size_t>(ranks)));
  if (!group) return;
  std::vector<float> flat;  // MiB: float32 keeps them to a few bytes
  for (const Rank& r : ranks_)
    for (double v : {r.peak, r.activations, r.parameters, r.optimizer})
      flat.push_back(static_cast<float>(mib(v)));
  tensorplay::Tensor t = tensorplay::from_vector(flat, {static_cast<int64_t>(flat.size())});
  group->all_reduce(t);
  const std::vector<float> sum = t.to_vector();
  for (size_t i = 0; i < ranks_.size(); ++i) {
    const double m = 1024.0 * 1024.0;
    ranks_[i] = {sum[4 * i] * m, sum[4 * i + 1] * m, sum[4 * i + 2] * m, sum[4 * i + 3] * m};
  }
}

void MemorySummary::print() const {
  bool any = false;
  for (const Rank& r : ranks_) any = any || r.peak > 0;
  if (!any) return;
  std::printf("measured memory per rank (the highest over the steps):\n");
  for (size_t i = 0; i < ranks_.size(); ++i) {
    const Rank& r = ranks_[i];
    std::printf(
        "  rank %zu: peak %.2f MiB (activations %.2f MiB, parameters %.2f MiB, optimizer "
        "%.2f MiB)\n",
        i, mib(r.peak), mib(r.activations), mib(r.parameters), mib(r.optimizer));
  }
}

}  // namespace train_gpt
