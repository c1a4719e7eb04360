#include "schedules/detail/v_block_choice.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

namespace tensorplay::schedules::detail {
namespace {

struct Candidate {
  VBlock block;
  VBlockScore score;
};

std::vector<Candidate> candidates(int ranks, int microbatches) {
  std::vector<Candidate> out;
  for (const VBlockShape& shape : v_block_shapes()) {
    VBlock block = place_v_block(ranks, shape);
    VBlockScore score = score_v_block(block, microbatches);
    out.push_back({std::move(block), score});
  }
  return out;
}

VBlock choose(int ranks, int microbatches, VMemoryGoal goal) {
  const std::vector<Candidate> all = candidates(ranks, microbatches);
  auto least_memory = [](const VBlockScore& s) {
    return std::tuple(s.peak_kept, s.peak_stashed, s.makespan);
  };
  const Candidate* min = &all.front();
  for (const Candidate& c : all)
    if (least_memory(c.score) < least_memory(min->score)) min = &c;
  if (goal == VMemoryGoal::Min) return min->block;
  const int cap = std::max(ranks, min->score.peak_kept);
  auto fastest = [](const VBlockScore& s) {
    return std::tuple(s.makespan, s.peak_kept, s.peak_stashed);
  };
  const Candidate* half = min;
  for (const Candidate& c : all)
    if (c.score.peak_kept <= cap && fastest(c.score) < fastest(half->score)) half = &c;
  return half->block;
}

}  // namespace

VBlock chosen_v_block(int ranks, int microbatches, VMemoryGoal goal) {
  static std::mutex mutex;
  static std::map<std::tuple<int, int, VMemoryGoal>, VBlock> chosen;
  const int timed = std::min(microbatches, 4 * ranks);
  std::lock_guard lock(mutex);
  auto key = std::tuple(ranks, timed, goal);
  auto it = chosen.find(key);
  if (it == chosen.end()) it = chosen.emplace(key, choose(ranks, timed, goal)).first;
  return it->second;
}

}  // namespace tensorplay::schedules::detail
