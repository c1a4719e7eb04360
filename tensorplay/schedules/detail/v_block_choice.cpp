#include "tensorplay/schedules/detail/v_block_choice.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <tuple>
#include <utility>

namespace tensorplay::schedules::detail {
namespace {

struct Candidate {
  VBlock block;
  VBlockPeaks peaks;
};

// Every distinct block the shapes give, with its peaks.
std::vector<Candidate> candidates(int ranks) {
  std::vector<Candidate> out;
  std::set<std::tuple<std::vector<int>, std::vector<int>, std::vector<int>>> seen;
  for (const VBlockShape& shape : v_block_shapes()) {
    VBlock block = place_v_block(ranks, shape);
    if (!seen.emplace(block.forward, block.input, block.weight).second) continue;
    const VBlockPeaks peaks = v_block_peaks(block);
    out.push_back({std::move(block), peaks});
  }
  return out;
}

// The fastest of the candidates `fits` accepts (the first of equally fast ones).
VBlock fastest(const std::vector<Candidate>& all, int n_microbatches, auto fits) {
  const Candidate* best = nullptr;
  double best_time = 0;
  for (const Candidate& c : all) {
    if (!fits(c.peaks)) continue;
    const double time = v_block_time(c.block, n_microbatches);
    if (best == nullptr || time < best_time) {
      best = &c;
      best_time = time;
    }
  }
  return best->block;
}

VBlock choose(int ranks, int n_microbatches, VMemoryGoal goal) {
  const std::vector<Candidate> all = candidates(ranks);
  auto memory = [](const VBlockPeaks& p) { return std::pair(p.kept, p.stashed); };
  VBlockPeaks least = all.front().peaks;
  for (const Candidate& c : all)
    least = std::min(least, c.peaks, [&](auto& a, auto& b) { return memory(a) < memory(b); });
  if (goal == VMemoryGoal::Min)
    return fastest(all, n_microbatches,
                   [&](const VBlockPeaks& p) { return memory(p) == memory(least); });
  const int cap = std::max(ranks, least.kept);
  return fastest(all, n_microbatches, [&](const VBlockPeaks& p) { return p.kept <= cap; });
}

}  // namespace

VBlock chosen_v_block(int ranks, int n_microbatches, VMemoryGoal goal) {
  static std::mutex mutex;
  static std::map<std::tuple<int, int, VMemoryGoal>, VBlock> chosen;
  const int timed = std::min(n_microbatches, 2 * ranks);
  std::lock_guard lock(mutex);
  auto key = std::tuple(ranks, timed, goal);
  auto it = chosen.find(key);
  if (it == chosen.end()) it = chosen.emplace(key, choose(ranks, timed, goal)).first;
  return it->second;
}

}  // namespace tensorplay::schedules::detail
