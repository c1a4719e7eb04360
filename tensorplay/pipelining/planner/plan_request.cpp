// A configuration in words, and the search's best answer (or why there is none).
#include "tensorplay/pipelining/planner/plan_request.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace tensorplay::pipelining {

namespace sc = tensorplay::schedules;

double PlanChoice::max_peak_bytes() const {
  return peak_bytes.empty() ? 0.0 : *std::max_element(peak_bytes.begin(), peak_bytes.end());
}

std::string PlanChoice::describe() const {
  std::string head = std::string(sc::schedule_name(schedule)) + ", " + std::to_string(ranks) +
                     " ranks x " + std::to_string(stages_per_rank) +
                     (stages_per_rank == 1 ? " stage" : " stages");
  if (n_microbatches > 0) head += ", " + std::to_string(n_microbatches) + " microbatches";
  if (stage_begin.empty()) return head;  // refused before a cut was chosen
  const int recomputed = static_cast<int>(std::count(recompute.begin(), recompute.end(), true));
  std::string r =
      recomputed == 0 ? "none"
      : recomputed == static_cast<int>(recompute.size())
          ? "full"
          : std::to_string(recomputed) + " of " + std::to_string(recompute.size()) + " stages";
  return head + ", cut " + (cut.empty() ? "given" : cut) + ", recompute " + r + ", " +
         std::to_string(threads) + (threads == 1 ? " thread" : " threads");
}

const PlanChoice& PlanResult::best() const {
  if (!ranked.empty() && ranked.front().feasible) return ranked.front();
  std::string reasons;
  for (size_t i = 0; i < ranked.size() && i < 5; ++i)
    reasons += "\n  " + ranked[i].describe() + ": " + ranked[i].why;
  throw std::runtime_error(
      "no configuration fits (" + std::to_string(ranked.size()) +
      " tried); the first few:" + reasons +
      "\nraise the memory cap, or plan for more ranks (with try_recompute, recomputation "
      "was tried)");
}

}  // namespace tensorplay::pipelining
