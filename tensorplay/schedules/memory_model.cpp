// predict_memory: a rank runs one action at a time, so replaying its actions in start order with
// what each takes at its start, holds while it runs and frees at its end gives its peak.
#include "tensorplay/schedules/memory_model.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>

namespace tensorplay::schedules {
namespace {

struct Effect {
  double taken = 0.0;      // at the start, kept after the end
  double transient = 0.0;  // only while running
  double freed = 0.0;      // at the end
};

// What each microbatch's I left for its W, by (stage, microbatch): a recomputing stage's I keeps
// a plain stage's stash after an F that kept its activations, its own after one it rebuilt.
using Stashes = std::map<std::pair<int, int>, double>;

// An F of a recomputing stage that keeps its activations for the backward right after it
// (`kept_activations`) holds them as a stage that does not recompute, and that backward rebuilds
// nothing.
void add_effect(const MemoryCosts& c, const Action& a, bool kept_activations, int num_stages,
                Stashes& stashes, Effect& e) {
  const int s = a.stage;
  // A stage of several recomputed segments recomputes before its own backward too.
  const bool kept = kept_activations && c.keeps_before_backward(s);
  const double held = kept ? MemoryCosts::of(c.activation_bytes, s) : c.kept(s);
  const bool rebuilds = c.recomputes(s) && !kept;
  const double stash =
      rebuilds ? c.rebuilding_weight_stash(s) : MemoryCosts::of(c.weight_stash_bytes, s);
  const std::pair<int, int> key{s, a.microbatch};
  switch (a.kind) {
    case ActionKind::Forward:
      e.transient += rebuilds ? c.recomputing_forward_transient(s) : c.forward_transient(s);
      e.taken += held + MemoryCosts::of(c.retained_bytes, s);
      if (s + 1 < num_stages) e.taken += MemoryCosts::of(c.sent_bytes, s);  // until taken
      break;
    case ActionKind::FullBackward:
      e.transient +=
          rebuilds ? c.rebuilding_full_backward_transient(s) : c.full_backward_transient(s);
      e.freed += held;
      break;
    case ActionKind::BackwardInput:
      e.transient += rebuilds ? c.rebuilding_input_transient(s) : c.input_transient(s);
      // A stash larger than what F kept (the output gradients W needs besides the activations)
      // grows while I runs: its workspace comes on top of the larger end, as it was measured.
      e.transient += std::max(0.0, stash - held);
      e.freed += held - stash;  // the weight stash stays until W
      stashes[key] = stash;
      break;
    case ActionKind::BackwardWeight: {
      e.transient += c.weight_transient(s);
      auto it = stashes.find(key);
      e.freed += it == stashes.end() ? stash : it->second;
      if (it != stashes.end()) stashes.erase(it);
      break;
    }
    case ActionKind::Unshard:  // a sharded stage's gathered bytes, held until its RESHARD
      e.taken += MemoryCosts::of(c.gathered_bytes, s);
      break;
    case ActionKind::Reshard:
      e.freed += MemoryCosts::of(c.gathered_bytes, s);
      break;
    case ActionKind::ReduceGrad:
      break;  // its buffers are not modelled
    default:
      e.transient += MemoryCosts::of(c.transient_bytes, s);
      break;
  }
}

// An overlapped F and B runs its parts one after the other: the most held is the highest point of
// each part over what the parts before it left, not the sum of their workspaces.
Effect effect_of(const MemoryCosts& c, const TimelineEvent& event, int num_stages,
                 Stashes& stashes) {
  Effect e;
  if (event.action.sub_actions.empty()) {
    add_effect(c, event.action, event.kept_activations, num_stages, stashes, e);
    return e;
  }
  double held = 0.0, peak = 0.0;
  for (const Action& sub : event.action.sub_actions) {
    Effect part;
    add_effect(c, sub, false, num_stages, stashes, part);
    peak = std::max(peak, held + part.taken + part.transient);
    held += part.taken - part.freed;
  }
  e.transient = peak;
  e.freed = -held;  // what the parts took and did not free stays after the end
  return e;
}

// An F of a stage after the first takes its inputs from the stage before: the sent bytes leave
// that stage's rank (they are this stage's activation bytes from now on). The maker's track shows
// it at its next action.
void take_inputs(const MemoryCosts& c, const TimelineEvent& event,
                 const std::vector<int>& stage_to_rank, std::vector<double>& held) {
  auto take = [&](const Action& a) {
    if (a.kind != ActionKind::Forward || a.stage == 0) return;
    const int maker = stage_to_rank[static_cast<std::size_t>(a.stage - 1)];
    held[static_cast<std::size_t>(maker)] -= MemoryCosts::of(c.sent_bytes, a.stage - 1);
  };
  if (event.action.sub_actions.empty()) take(event.action);
  for (const Action& sub : event.action.sub_actions) take(sub);
}

}  // namespace

MemoryPrediction predict_memory(const SimulationResult& result,
                                const std::vector<int>& stage_to_rank, const MemoryCosts& costs) {
  const int num_stages = static_cast<int>(stage_to_rank.size());
  costs.check(num_stages);
  if (result.timeline.empty() && result.actions > 0)
    throw std::invalid_argument(
        "predict_memory needs the step's timeline: simulate with record_timeline = true");
  const std::size_t ranks = result.busy.size();
  // Every index is checked before it is used: the placement's ranks, and each event's rank and
  // stages (a result of another pipeline would be read past its end otherwise).
  for (int s = 0; s < num_stages; ++s)
    if (stage_to_rank[s] < 0 || static_cast<std::size_t>(stage_to_rank[s]) >= ranks)
      throw std::invalid_argument("predict_memory: stage " + std::to_string(s) +
                                  " is placed on rank " + std::to_string(stage_to_rank[s]) +
                                  " but the result has " + std::to_string(ranks) + " ranks");
  auto check_stage = [&](const Action& a) {
    if (a.stage < 0 || a.stage >= num_stages)
      throw std::invalid_argument("predict_memory: the timeline's " + to_string(a) +
                                  " is not an action of the " + std::to_string(num_stages) +
                                  " stages");
  };
  for (const TimelineEvent& event : result.timeline) {
    if (event.rank < 0 || static_cast<std::size_t>(event.rank) >= ranks)
      throw std::invalid_argument("predict_memory: the timeline has rank " +
                                  std::to_string(event.rank) + " but the result has " +
                                  std::to_string(ranks) + " ranks");
    if (event.action.sub_actions.empty()) check_stage(event.action);  // else OVERLAP_F_B's -1
    for (const Action& sub : event.action.sub_actions) check_stage(sub);
  }
  MemoryPrediction out;
  out.peak_activation_bytes.assign(ranks, 0.0);
  out.fixed_bytes.assign(ranks, 0.0);
  for (int s = 0; s < num_stages; ++s)
    out.fixed_bytes[static_cast<std::size_t>(stage_to_rank[s])] +=
        MemoryCosts::of(costs.fixed_bytes, s);
  // The timeline is in start order; a rank's actions never overlap, so each one's end comes
  // before the rank's next start.
  std::vector<double> held(ranks, 0.0);
  Stashes stashes;
  for (const TimelineEvent& event : result.timeline) {
    const std::size_t r = static_cast<std::size_t>(event.rank);
    take_inputs(costs, event, stage_to_rank, held);
    const Effect e = effect_of(costs, event, num_stages, stashes);
    held[r] += e.taken;
    out.peak_activation_bytes[r] = std::max(out.peak_activation_bytes[r], held[r] + e.transient);
    out.track.push_back({event.rank, event.start, held[r] + e.transient});
    held[r] -= e.freed;
    out.track.push_back({event.rank, event.end, held[r]});
  }
  for (std::size_t r = 0; r < ranks; ++r)
    out.peak_bytes.push_back(out.fixed_bytes[r] + out.peak_activation_bytes[r]);
  return out;
}

}  // namespace tensorplay::schedules
