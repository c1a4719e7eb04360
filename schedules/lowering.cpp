#include "schedules/lowering.h"

#include <string>
#include <unordered_set>

#include "schedules/errors.h"
#include "schedules/format.h"

namespace tensorplay::schedules {

PipelineOrder lower_to_communication(const PipelineOrder& compute_order,
                                     const std::vector<int>& stage_to_rank) {
  const int num_stages = static_cast<int>(stage_to_rank.size());
  const int ranks = static_cast<int>(compute_order.size());
  auto rank_of = [&](int stage) {
    if (stage < 0 || stage >= num_stages) {
      throw std::invalid_argument("stage " + std::to_string(stage) +
                                  " has no rank in the placement of " + std::to_string(num_stages) +
                                  " stages");
    }
    return stage_to_rank[stage];
  };
  // F sends forward when the next stage is elsewhere; I/B send backward when the previous is.
  auto has_comms = [&](const Action& a) {
    if (a.kind == ActionKind::Forward) {
      return a.stage != num_stages - 1 && rank_of(a.stage + 1) != rank_of(a.stage);
    }
    if (is_input_backward(a.kind)) return a.stage != 0 && rank_of(a.stage - 1) != rank_of(a.stage);
    return false;
  };

  PipelineOrder lowered(ranks);
  std::vector<std::unordered_set<Action, ActionHash>> prev(ranks);
  // A rank never places its own RECV: the sender does. So a compute action is ready once its
  // input was received, or produced by a stage on the same rank.
  auto ready = [&](const Action& a, int rank) {
    const auto& seen = prev[rank];
    if (a.kind == ActionKind::Forward && a.stage != 0) {
      return seen.count(make_action(a.stage, ActionKind::RecvF, a.microbatch)) > 0 ||
             seen.count(make_action(a.stage - 1, ActionKind::Forward, a.microbatch)) > 0;
    }
    if (is_input_backward(a.kind) && a.stage != num_stages - 1) {
      return seen.count(make_action(a.stage, ActionKind::RecvB, a.microbatch)) > 0 ||
             seen.count(make_action(a.stage + 1, ActionKind::BackwardInput, a.microbatch)) > 0 ||
             seen.count(make_action(a.stage + 1, ActionKind::FullBackward, a.microbatch)) > 0;
    }
    return true;
  };

  std::vector<int> next(ranks, 0);
  std::size_t remaining = 0;
  for (const auto& r : compute_order) remaining += r.size();
  while (remaining > 0) {
    bool progress = false;
    for (int rank = 0; rank < ranks; ++rank) {
      if (next[rank] >= static_cast<int>(compute_order[rank].size())) continue;
      const Action& action = compute_order[rank][next[rank]];
      const bool composite = !action.sub_actions.empty();
      std::vector<Action> parts =
          composite ? std::vector<Action>(action.sub_actions.begin(), action.sub_actions.end())
                    : std::vector<Action>{action};
      bool all_ready = true;
      for (const Action& part : parts) all_ready = all_ready && ready(part, rank);
      if (!all_ready) continue;

      lowered[rank].push_back(action);
      for (const Action& part : parts) {
        prev[rank].insert(part);
        if (!has_comms(part)) continue;
        bool forward = part.kind == ActionKind::Forward;
        Action send = make_action(part.stage, forward ? ActionKind::SendF : ActionKind::SendB,
                                  part.microbatch);
        Action recv = make_action(forward ? part.stage + 1 : part.stage - 1,
                                  forward ? ActionKind::RecvF : ActionKind::RecvB, part.microbatch);
        lowered[rank].push_back(send);
        prev[rank].insert(send);
        int peer = rank_of(recv.stage);
        lowered[peer].push_back(recv);
        prev[peer].insert(recv);
      }
      ++next[rank];
      --remaining;
      progress = true;
    }
    if (!progress) {
      std::string stuck = describe_blocked_ranks(compute_order, next);
      throw ScheduleError(
          "Malformed compute schedule, can't schedule sends/recvs: no rank's next action has its "
          "input" +
          stuck + "\n\nLowered so far:\n" + format_pipeline_order(lowered));
    }
  }
  return lowered;
}

PipelineOrder strip_communication(const PipelineOrder& order) {
  PipelineOrder compute(order.size());
  for (std::size_t r = 0; r < order.size(); ++r) {
    for (const Action& a : order[r]) {
      if (is_compute(a.kind)) compute[r].push_back(a);
    }
  }
  return compute;
}

}  // namespace tensorplay::schedules
