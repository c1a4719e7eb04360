// Message-log reader: parses the log lines written by message_log.cpp onto rank 0's clock, merges
// the logs of several processes, and rebuilds a step's timeline from its start/finish pairs.
#include "actors/trace_log.h"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

#include "schedules/action.h"

namespace tensorplay::pipelining {
namespace {

constexpr int64_t kMaxRanks = int64_t{1} << 20;

// The value after `key=` up to the next space (or the end), or false when the key is absent.
bool field(const std::string& line, const std::string& key, std::string& value) {
  size_t at = line.find(" " + key + "=");
  size_t skip = key.size() + 2;
  if (at == std::string::npos) {
    if (line.rfind(key + "=", 0) != 0) return false;
    at = 0;
    skip = key.size() + 1;
  }
  size_t begin = at + skip;
  size_t end = line.find(' ', begin);
  value = line.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
  return true;
}

int64_t to_integer(const std::string& text, const std::string& key, size_t line_number) {
  size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size())
    throw std::invalid_argument("message log line " + std::to_string(line_number) + ": " + key +
                                "='" + text + "' is not an integer");
  return value;
}

// The N of a clock line's `offset_us:N`.
int64_t clock_offset(const std::string& what, size_t line_number) {
  const std::string prefix = "offset_us:";
  if (what.rfind(prefix, 0) != 0)
    throw std::invalid_argument("message log line " + std::to_string(line_number) +
                                ": a clock line's what='" + what + "' is not offset_us:N");
  return to_integer(what.substr(prefix.size()), "offset_us", line_number);
}

}  // namespace

std::vector<LogEvent> parse_message_log(std::istream& in) {
  std::vector<LogEvent> events;
  std::vector<std::pair<size_t, int64_t>> clocks;  // index of the clock line's event, its offset
  std::string line;
  size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    std::string rank, step, event, t_us;
    if (!field(line, "rank", rank) || !field(line, "step", step) || !field(line, "event", event) ||
        !field(line, "t_us", t_us))
      continue;
    // `what` may hold spaces ("input 1:0"): it runs from its key to " t_us=".
    size_t what_at = line.find(" what=");
    size_t t_at = line.find(" t_us=");
    if (what_at == std::string::npos || t_at == std::string::npos || t_at < what_at) continue;
    LogEvent e;
    int64_t r = to_integer(rank, "rank", number);
    if (r < 0 || r >= kMaxRanks)
      throw std::invalid_argument("message log line " + std::to_string(number) + ": rank=" + rank +
                                  " is outside [0, " + std::to_string(kMaxRanks) + ")");
    e.rank = static_cast<int>(r);
    const int64_t step_number = to_integer(step, "step", number);
    if (step_number < 0)
      throw std::invalid_argument("message log line " + std::to_string(number) + ": step=" + step +
                                  " is negative (steps count from 1; is the log damaged?)");
    e.step = static_cast<uint64_t>(step_number);
    e.event = event;
    e.what = line.substr(what_at + 6, t_at - what_at - 6);
    e.t_us = to_integer(t_us, "t_us", number);
    if (e.event == "clock") clocks.emplace_back(events.size(), clock_offset(e.what, number));
    events.push_back(std::move(e));
  }
  // A clock line's offset holds from it on; the first one also before it, for lines logged
  // before init had measured it (the offset is the process's, not the line's).
  for (size_t k = 0; k < clocks.size(); ++k) {
    size_t begin = k == 0 ? 0 : clocks[k].first;
    size_t end = k + 1 < clocks.size() ? clocks[k + 1].first : events.size();
    for (size_t i = begin; i < end; ++i) events[i].t_us += clocks[k].second;
  }
  return events;
}

std::vector<LogEvent> merge_message_logs(const std::vector<MessageLogFile>& logs) {
  std::map<int, size_t> file_of_rank;  // the log each rank was first seen in
  std::vector<LogEvent> events;
  for (size_t f = 0; f < logs.size(); ++f) {
    for (const LogEvent& e : logs[f].events) {
      auto [it, first] = file_of_rank.emplace(e.rank, f);
      if (first || it->second == f) continue;
      const std::string& other = logs[it->second].name;
      if (other == logs[f].name)
        throw std::invalid_argument("message log '" + other +
                                    "' is passed twice; pass each process's log once");
      throw std::invalid_argument(
          "message logs: rank " + std::to_string(e.rank) + " is in both '" + other + "' and '" +
          logs[f].name +
          "'; each rank's events must come from one process's log (the same log copied, or logs "
          "of two runs? pass one run's logs)");
    }
    events.insert(events.end(), logs[f].events.begin(), logs[f].events.end());
  }
  return events;
}

std::vector<uint64_t> logged_steps(const std::vector<LogEvent>& events) {
  std::set<uint64_t> steps;
  for (const LogEvent& e : events)
    if (e.event != "clock") steps.insert(e.step);
  return {steps.begin(), steps.end()};
}

schedules::SimulationResult step_timeline(const std::vector<LogEvent>& events, uint64_t step) {
  using schedules::ActionKind;
  // Open starts per (rank, action text); a rank runs one action at a time, but pairing by text
  // also survives logs merged from several processes.
  std::map<std::pair<int, std::string>, int64_t> open;
  std::vector<std::tuple<int, std::string, int64_t, int64_t>> runs;  // rank, what, start, end
  int ranks = 0;
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
  int64_t t0 = std::get<2>(runs.front());
  for (const auto& r : runs) t0 = std::min(t0, std::get<2>(r));
  std::sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) {
    return std::tie(std::get<2>(a), std::get<0>(a)) < std::tie(std::get<2>(b), std::get<0>(b));
  });

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
