// A step's time split per rank into compute, the schedule's bubble, hand-offs and the runtime,
// from the message log and a simulator replay of the same actions.
#include "tensorplay/observe/step_attribution.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <stdexcept>

#include "tensorplay/schedules/simulator.h"

namespace tensorplay::pipelining {
namespace {

using schedules::Action;
using schedules::ActionKind;

/// The message-log text of the input an action waits for from another rank ("input 2:3", "grad
/// 1:3"), or empty for one that waits on none (a W, or a first stage's F).
std::string input_of(const Action& a) {
  const std::string where = std::to_string(a.stage) + ":" + std::to_string(a.microbatch);
  switch (a.kind) {
    case ActionKind::Forward:
      return "input " + where;
    case ActionKind::BackwardInput:
    case ActionKind::FullBackward:
      return "grad " + where;
    default:
      return {};
  }
}

/// Per stage, the mean measured time of each kind of action, as a cost model.
schedules::CostModel measured_costs(const schedules::SimulationResult& timeline, int stages) {
  std::vector<std::map<ActionKind, std::pair<double, int>>> sums(stages);
  for (const auto& e : timeline.timeline) {
    if (e.action.kind == ActionKind::OverlapFB) continue;  // its parts are measured elsewhere
    auto& [total, count] = sums.at(e.action.stage)[e.action.kind];
    total += e.end - e.start;
    ++count;
  }
  auto mean = [&](int stage, ActionKind kind) {
    auto it = sums[stage].find(kind);
    return it == sums[stage].end() ? 0.0 : it->second.first / it->second.second;
  };
  schedules::CostModel costs;
  costs.forward.assign(stages, 0.0);
  costs.input_backward.assign(stages, 0.0);
  costs.weight_backward.assign(stages, 0.0);
  for (int s = 0; s < stages; ++s) {
    costs.forward[s] = mean(s, ActionKind::Forward);
    if (sums[s].count(ActionKind::BackwardInput)) {  // split backward: B costs I + W
      costs.input_backward[s] = mean(s, ActionKind::BackwardInput);
      costs.weight_backward[s] = mean(s, ActionKind::BackwardWeight);
    } else {
      costs.input_backward[s] = mean(s, ActionKind::FullBackward);
    }
  }
  return costs;
}

/// The simulator's replay of the measured step: each rank's actions in the order they ran, each
/// stage's mean action times, transfers free. Empty idle when it cannot replay the step.
schedules::SimulationResult ideal_replay(const schedules::SimulationResult& timeline, int ranks) {
  schedules::PipelineOrder order(ranks);
  std::map<int, int> stage_rank;
  int n_microbatches = 0;
  for (const auto& e : timeline.timeline) {  // in start order
    order.at(e.rank).push_back(e.action);
    auto note = [&](const Action& a) {
      stage_rank[a.stage] = e.rank;
      n_microbatches = std::max(n_microbatches, a.microbatch + 1);
    };
    if (e.action.kind == ActionKind::OverlapFB)
      for (const Action& part : e.action.sub_actions) note(part);
    else
      note(e.action);
  }
  const int stages = stage_rank.empty() ? 0 : stage_rank.rbegin()->first + 1;
  if (static_cast<int>(stage_rank.size()) != stages) return {};  // a stage ran nothing: no replay
  std::vector<int> stage_to_rank(stages);
  for (const auto& [stage, rank] : stage_rank) stage_to_rank[stage] = rank;
  try {
    return schedules::simulate_order(order, stage_to_rank, n_microbatches,
                                     measured_costs(timeline, stages), {.record_timeline = false});
  } catch (const std::exception&) {
    return {};  // an order the simulator does not take (an overlapped pair): no bubble figure
  }
}

/// When each transfer of the step was sent, and when its notification arrived, by log text.
struct Transfers {
  std::map<std::string, int64_t> sent, arrived;
};

void add_handoffs(const schedules::SimulationResult& timeline, const Transfers& transfers,
                  std::vector<RankAttribution>& ranks) {
  std::vector<double> free_at(ranks.size(), 0.0);  // each rank's last action end (from t0)
  for (const auto& e : timeline.timeline) {
    RankAttribution& r = ranks.at(e.rank);
    double sent = -1, arrived = -1;
    auto look = [&](const Action& a) {
      const std::string key = input_of(a);
      if (auto it = transfers.sent.find(key); it != transfers.sent.end()) {
        sent = std::max(sent, static_cast<double>(it->second));
        if (auto at = transfers.arrived.find(key); at != transfers.arrived.end())
          arrived = std::max(arrived, static_cast<double>(at->second));
      }
    };
    if (e.action.kind == ActionKind::OverlapFB)
      for (const Action& part : e.action.sub_actions) look(part);
    else
      look(e.action);
    const double free = free_at[e.rank];
    free_at[e.rank] = std::max(free, e.end);
    // Waited on the hand-off: it was sent, and arrived, after the rank turned free.
    if (sent < 0 || std::max(sent, arrived) <= free || e.start <= free) continue;
    const double from = std::max(sent, free), waited = e.start - from;
    if (waited <= 0) continue;
    const double transfer = arrived < 0 ? 0.0 : std::clamp(arrived - from, 0.0, waited);
    r.handoff_us += waited;
    r.transfer_us += transfer;
    r.dispatch_us += waited - transfer;
    ++r.handoffs;
  }
}

void add_thread_times(const LogEvent& e, std::vector<RankAttribution>& ranks) {
  if (e.rank >= static_cast<int>(ranks.size())) return;
  long long cpu = 0, runnable = 0;
  if (std::sscanf(e.what.c_str(), "cpu_us:%lld runnable_us:%lld", &cpu, &runnable) != 2) return;
  ranks[e.rank].thread_cpu_us = static_cast<double>(cpu);
  ranks[e.rank].runnable_us = static_cast<double>(runnable);
}

}  // namespace

StepAttribution attribute_step(const std::vector<LogEvent>& events, uint64_t step) {
  const schedules::SimulationResult timeline = step_timeline(events, step);
  int64_t t0 = INT64_MAX;
  for (const LogEvent& e : events)
    if (e.step == step && e.event == "start") t0 = std::min(t0, e.t_us);
  const int n = static_cast<int>(timeline.busy.size());
  StepAttribution out;
  out.step = step;
  out.makespan_us = timeline.makespan;
  out.ranks.resize(n);
  Transfers transfers;
  int64_t begun = INT64_MAX, done = INT64_MIN;
  for (const LogEvent& e : events) {
    if (e.step != step) continue;
    if (e.event == "recv" && e.what == "step") begun = std::min(begun, e.t_us);
    if (e.event == "done") done = std::max(done, e.t_us);
    if (e.event == "send") transfers.sent[e.what] = e.t_us - t0;
    if (e.event == "recv") transfers.arrived[e.what] = e.t_us - t0;
    if (e.event == "sched") add_thread_times(e, out.ranks);
  }
  if (begun != INT64_MAX && done != INT64_MIN && done > begun)
    out.step_span_us = static_cast<double>(done - begun);
  const schedules::SimulationResult ideal = ideal_replay(timeline, n);
  out.ideal_makespan_us = ideal.makespan;
  for (int r = 0; r < n; ++r) {
    RankAttribution& a = out.ranks[r];
    a.rank = r;
    a.step_us = timeline.makespan;
    a.compute_us = timeline.busy[r];
    a.bubble_us = r < static_cast<int>(ideal.idle.size()) ? ideal.idle[r] : 0.0;
  }
  add_handoffs(timeline, transfers, out.ranks);
  // The hand-off waits lie in the rank's idle time; the replay's bubble takes at most what they
  // leave of it (measured action times vary about the means it replays), the runtime the rest.
  for (RankAttribution& a : out.ranks) {
    const double idle = std::max(0.0, a.step_us - a.compute_us);
    a.handoff_us = std::min(a.handoff_us, idle);
    a.bubble_us = std::clamp(a.bubble_us, 0.0, idle - a.handoff_us);
    a.runtime_us = idle - a.handoff_us - a.bubble_us;
  }
  return out;
}

StepAttribution mean_attribution(const std::vector<StepAttribution>& steps) {
  if (steps.empty()) throw std::invalid_argument("mean_attribution: no steps to average");
  StepAttribution out = steps.back();
  const double n = static_cast<double>(steps.size());
  auto mean = [&](auto field) {
    double sum = 0;
    for (const StepAttribution& s : steps) sum += field(s);
    return sum / n;
  };
  out.makespan_us = mean([](const StepAttribution& s) { return s.makespan_us; });
  out.ideal_makespan_us = mean([](const StepAttribution& s) { return s.ideal_makespan_us; });
  out.step_span_us = mean([](const StepAttribution& s) { return s.step_span_us; });
  for (size_t r = 0; r < out.ranks.size(); ++r) {
    auto rank_mean = [&](double RankAttribution::*field) {
      double sum = 0;
      for (const StepAttribution& s : steps) sum += r < s.ranks.size() ? s.ranks[r].*field : 0.0;
      return sum / n;
    };
    for (double RankAttribution::*f :
         {&RankAttribution::step_us, &RankAttribution::compute_us, &RankAttribution::bubble_us,
          &RankAttribution::handoff_us, &RankAttribution::transfer_us,
          &RankAttribution::dispatch_us, &RankAttribution::runtime_us,
          &RankAttribution::thread_cpu_us, &RankAttribution::runnable_us})
      out.ranks[r].*f = rank_mean(f);
    int handoffs = 0;
    for (const StepAttribution& s : steps) handoffs += r < s.ranks.size() ? s.ranks[r].handoffs : 0;
    out.ranks[r].handoffs = static_cast<int>(handoffs / n + 0.5);
  }
  return out;
}

std::string format_attribution(const StepAttribution& a) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(0);
  out << "  step " << a.makespan_us << " us against the schedule's " << a.ideal_makespan_us
      << " us on the same action times";
  if (a.step_span_us > 0) out << " (step() inside the runtime: " << a.step_span_us << " us)";
  out << "\n";
  for (const RankAttribution& r : a.ranks) {
    out << "  rank " << r.rank << ": compute " << r.compute_us << " + bubble " << r.bubble_us
        << " + hand-off " << r.handoff_us << " (transfer " << r.transfer_us << ", dispatch "
        << r.dispatch_us << ", " << r.handoffs << " waits) + runtime " << r.runtime_us << " us";
    if (r.runnable_us >= 0)
      out << "; compute thread runnable, not running " << r.runnable_us << " us";
    out << "\n";
  }
  return out.str();
}

std::string attribution_json(const StepAttribution& a) {
  std::ostringstream out;
  out << "{\"makespan_us\":" << a.makespan_us << ",\"ideal_makespan_us\":" << a.ideal_makespan_us
      << ",\"step_span_us\":" << a.step_span_us << ",\"ranks\":[";
  for (size_t i = 0; i < a.ranks.size(); ++i) {
    const RankAttribution& r = a.ranks[i];
    out << (i ? "," : "") << "{\"rank\":" << r.rank << ",\"step_us\":" << r.step_us
        << ",\"compute_us\":" << r.compute_us << ",\"bubble_us\":" << r.bubble_us
        << ",\"handoff_us\":" << r.handoff_us << ",\"transfer_us\":" << r.transfer_us
        << ",\"dispatch_us\":" << r.dispatch_us << ",\"handoffs\":" << r.handoffs
        << ",\"runtime_us\":" << r.runtime_us;
    if (r.runnable_us >= 0)  // absent where the log has no sched line
      out << ",\"thread_cpu_us\":" << r.thread_cpu_us << ",\"runnable_us\":" << r.runnable_us;
    out << "}";
  }
  out << "]}";
  return out.str();
}

}  // namespace tensorplay::pipelining
