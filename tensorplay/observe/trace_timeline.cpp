// A step's timeline read back from the message log: each action's start and finish paired per
// rank, and the figures the simulator reports for the same step (busy, idle, bubble, peaks).
#include <algorithm>
#include <map>
#include <stdexcept>
#include <tuple>

#include "tensorplay/observe/trace_log.h"
#include "tensorplay/schedules/action.h"

namespace tensorplay::pipelining {

namespace {

/// An action a rank ran: rank, action text, start and end (microseconds).
using ActionRun = std::tuple<int, std::string, int64_t, int64_t>;

/// Step `step`'s actions paired from their start and finish events, by start time; `ranks` is
/// set to the number of ranks seen. Throws std::invalid_argument for a step it cannot measure.
std::vector<ActionRun> paired_runs(const std::vector<LogEvent>& events, uint64_t step, int& ranks) {
  // Open starts per (rank, action text); a rank runs one action at a time, but pairing by text
  // also survives logs merged from several processes.
  std::map<std::pair<int, std::string>, int64_t> open;
  std::vector<ActionRun> runs;
  ranks = 0;
  for (const LogEvent& e : events) {
    if (e.step != step || e.event == "clock") continue;
    ranks = std::max(ranks, e.rank + 1);
    if (e.event == "start") {
      if (!open.emplace(std::make_pair(e.rank, e.what), e.t_us).second)
        throw std::invalid_argument("message log: step " + std::to_string(step) + ": rank " +
                                    std::to_string(e.rank) + " started " + e.what +
                                    " twice without finishing it (logs of two schedules that "
                                    "both number this step? pass one schedule's log)");
    } else if (e.event == "finish") {
      auto it = open.find({e.rank, e.what});
      if (it == open.end()) continue;  // its start was cut off the log
      runs.emplace_back(e.rank, e.what, it->second, e.t_us);
      open.erase(it);
    }
  }
  if (!open.empty()) {
    const auto& [key, t] = *open.begin();
    throw std::invalid_argument("message log: step " + std::to_string(step) + ": rank " +
                                std::to_string(key.first) + " started " + key.second +
                                " and never finished it (was the log cut short, or did the "
                                "step fail?)");
  }
  if (runs.empty())
    throw std::invalid_argument("message log: step " + std::to_string(step) +
                                " has no start/finish events (is the log at debug level?)");
  std::sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) {
    return std::tie(std::get<2>(a), std::get<0>(a)) < std::tie(std::get<2>(b), std::get<0>(b));
  });

  return runs;
}

}  // namespace

schedules::SimulationResult step_timeline(const std::vector<LogEvent>& events, uint64_t step) {
  int ranks = 0;
  std::vector<ActionRun> runs = paired_runs(events, step, ranks);
  int64_t t0 = std::get<2>(runs.front());
  for (const auto& r : runs) t0 = std::min(t0, std::get<2>(r));
  schedules::SimulationResult result;
  result.busy.assign(ranks, 0.0);
  result.first_start.assign(ranks, -1.0);
  result.last_end.assign(ranks, 0.0);
  result.peak_activations.assign(ranks, 0);
  // Activation changes per rank in time order: +1 at a forward's start, -1 at a B or W end.
  std::vector<std::vector<std::pair<double, int>>> changes(ranks);
  for (const auto& [rank, what, start, end] : runs) {
    schedules::Action action = schedules::parse_action(what);
    double s = static_cast<double>(start - t0), f = static_cast<double>(end - t0);
    result.timeline.push_back({rank, action, s, f});
    result.busy[rank] += f - s;
    if (result.first_start[rank] < 0) result.first_start[rank] = s;
    result.last_end[rank] = std::max(result.last_end[rank], f);
    result.makespan = std::max(result.makespan, f);
    // The count the simulator and the policies keep: taken at the start, freed at the end.
    if (int taken = schedules::activations_taken(action)) changes[rank].emplace_back(s, taken);
    if (int freed = schedules::activations_freed(action)) changes[rank].emplace_back(f, -freed);
  }
  result.actions = runs.size();
  double idle_total = 0.0;
  for (int r = 0; r < ranks; ++r) {
    result.idle.push_back(result.makespan - result.busy[r]);
    idle_total += result.idle.back();
    if (result.first_start[r] >= 0)
      result.span = std::max(result.span, result.last_end[r] - result.first_start[r]);
    // Ends before starts at the same instant: a freed activation is gone before the next one.
    std::sort(changes[r].begin(), changes[r].end());
    int held = 0;
    for (const auto& [t, delta] : changes[r]) {
      held += delta;
      result.peak_activations[r] = std::max(result.peak_activations[r], held);
    }
  }
  result.bubble_fraction = result.makespan > 0 ? idle_total / (ranks * result.makespan) : 0.0;
  return result;
}

}  // namespace tensorplay::pipelining
