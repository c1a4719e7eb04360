// The planner's report (plan_report.h).
#include "tensorplay/pipelining/planner/plan_report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

namespace tensorplay::pipelining {
namespace {

std::string figures(const PlanChoice& c) {
  char text[96];
  std::snprintf(text, sizeof text, "step %.4g s, bubble %.1f%%, peak %.3g MB", c.step_seconds,
                100 * c.bubble, c.max_peak_bytes() / 1e6);
  return text;
}

// The reason's family: the words before the first ':' ("over the memory cap", "+3.0% step").
std::string family(const std::string& why) {
  if (why.find("over the memory cap") == 0) return "over the memory cap";
  if (why.find("cannot run these sizes") != std::string::npos) return "sizes the schedule refuses";
  if (why.find("segments") != std::string::npos) return "more stages than segments";
  if (why.find("bubble") != std::string::npos) return "bubble";
  if (why.find("communication") != std::string::npos) return "communication";
  return "compute (cut, threads, recomputation)";
}

}  // namespace

std::string format_plan_report(const PlanResult& result, int top) {
  std::ostringstream out;
  out << result.configs << " configurations simulated in " << result.seconds << " s";
  if (!result.channel.empty()) out << ", transfers over the " << result.channel << " channel";
  out << "\n";
  int shown = 0;
  for (const PlanChoice& c : result.ranked) {
    if (!c.feasible || shown >= top) break;
    out << "  " << ++shown << ". " << c.describe() << ": " << figures(c)
        << (c.why.empty() ? "" : "  (" + c.why + ")") << "\n";
  }
  if (shown == 0) out << "  no configuration fits\n";
  std::map<std::string, std::pair<int, const PlanChoice*>> lost;
  int index = 0;
  for (const PlanChoice& c : result.ranked) {
    if (index++ < shown) continue;
    auto& [count, example] = lost[family(c.why)];
    if (count++ == 0) example = &c;
  }
  if (!lost.empty()) out << "why the others lost:\n";
  for (const auto& [reason, entry] : lost)
    out << "  " << reason << ": " << entry.first << " (e.g. " << entry.second->describe() << ": "
        << entry.second->why << ")\n";
  return out.str();
}

}  // namespace tensorplay::pipelining
