// memory_track: reads the `memory` lines the stage workers log after each action.
#include "tensorplay/observe/memory_track.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

namespace tensorplay::pipelining {

std::vector<schedules::MemorySample> memory_track(const std::vector<LogEvent>& events,
                                                  uint64_t step) {
  int64_t t0 = std::numeric_limits<int64_t>::max();
  for (const LogEvent& e : events)
    if (e.step == step && e.event == "start") t0 = std::min(t0, e.t_us);
  std::vector<schedules::MemorySample> track;
  const std::string prefix = "bytes:";
  for (const LogEvent& e : events) {
    if (e.step != step || e.event != "memory") continue;
    if (e.what.rfind(prefix, 0) != 0)
      throw std::invalid_argument("message log: step " + std::to_string(step) + ": rank " +
                                  std::to_string(e.rank) + " logged memory as '" + e.what +
                                  "', expected bytes:N");
    double bytes = 0;
    try {
      bytes = std::stod(e.what.substr(prefix.size()));
    } catch (const std::exception&) {
      throw std::invalid_argument("message log: step " + std::to_string(step) + ": rank " +
                                  std::to_string(e.rank) + " logged memory as '" + e.what +
                                  "', expected bytes:N");
    }
    const double time = t0 == std::numeric_limits<int64_t>::max() ? 0.0 : double(e.t_us - t0);
    track.push_back({e.rank, time, bytes});
  }
  return track;
}

std::vector<double> most_held(const std::vector<schedules::MemorySample>& track, int ranks) {
  std::vector<double> most(static_cast<size_t>(std::max(ranks, 0)), 0.0);
  for (const auto& s : track)
    if (s.rank >= 0 && s.rank < ranks) most[s.rank] = std::max(most[s.rank], s.bytes);
  return most;
}

}  // namespace tensorplay::pipelining
