#include "tensorplay/schedules/lowering.h"

#include <string>
#include <unordered_set>

#include "tensorplay/schedules/errors.h"
#include "tensorplay/schedules/format.h"

namespace tensorplay::schedules {

namespace {

// Lowering one compute order: each rank's next action is placed once its input is there, with
// the sends it makes and the peer's matching receives.
class Lowering {
 public:
  Lowering(const PipelineOrder& compute_order, const std::vector<int>& stage_to_rank)
      : compute_order_(compute_order),
        stage_to_rank_(stage_to_rank),
        num_stages_(static_cast<int>(stage_to_rank.size())),
        lowered_(compute_order.size()),
        seen_(compute_order.size()),
        next_(compute_order.size(), 0) {}

  PipelineOrder run() {
    std::size_t remaining = 0;
    for (const auto& r : compute_order_) remaining += r.size();
    while (remaining > 0) {
      bool progress = false;
      for (int rank = 0; rank < static_cast<int>(compute_order_.size()); ++rank) {
        if (!place_next(rank)) continue;
        --remaining;
        progress = true;
      }
      if (!progress) {
        std::string stuck = describe_blocked_ranks(compute_order_, next_);
        throw ScheduleError(
            "Malformed compute schedule, can't schedule sends/recvs: no rank's next action has "
            "its input" +
            stuck + "\n\nLowered so far:\n" + format_pipeline_order(lowered_));
      }
    }
    return std::move(lowered_);
  }

 private:
  int rank_of(int stage) const {
    if (stage < 0 || stage >= num_stages_) {
      throw std::invalid_argument("stage " + std::to_string(stage) +
                                  " has no rank in the placement of " +
                                  std::to_string(num_stages_) + " stages");
    }
    return stage_to_rank_[stage];
  }

  // F sends forward when the next stage is elsewhere; I/B send backward when the previous is.
  bool has_comms(const Action& a) const {
    if (a.kind == ActionKind::Forward) {
      return a.stage != num_stages_ - 1 && rank_of(a.stage + 1) != rank_of(a.stage);
    }
    if (is_input_backward(a.kind)) return a.stage != 0 && rank_of(a.stage - 1) != rank_of(a.stage);
    return false;
  }

  // A rank never places its own RECV: the sender does. So a compute action is ready once its
  // input was received, or produced by a stage on the same rank.
  bool ready(const Action& a, int rank) const {
    const auto& seen = seen_[rank];
    if (a.kind == ActionKind::Forward && a.stage != 0) {
      return seen.count(make_action(a.stage, ActionKind::RecvF, a.microbatch)) > 0 ||
             seen.count(make_action(a.stage - 1, ActionKind::Forward, a.microbatch)) > 0;
    }
    if (is_input_backward(a.kind) && a.stage != num_stages_ - 1) {
      return seen.count(make_action(a.stage, ActionKind::RecvB, a.microbatch)) > 0 ||
             seen.count(make_action(a.stage + 1, ActionKind::BackwardInput, a.microbatch)) > 0 ||
             seen.count(make_action(a.stage + 1, ActionKind::FullBackward, a.microbatch)) > 0;
    }
    return true;
  }

  void emit(int rank, const Action& action) {
    lowered_[rank].push_back(action);
    seen_[rank].insert(action);
  }

  // Places `rank`'s next action (its parts' sends, and the peers' receives) when every part's
  // input is there; false when the rank is done or waits.
  bool place_next(int rank) {
    if (next_[rank] >= static_cast<int>(compute_order_[rank].size())) return false;
    const Action& action = compute_order_[rank][next_[rank]];
    const std::vector<Action> parts =
        action.sub_actions.empty()
            ? std::vector<Action>{action}
            : std::vector<Action>(action.sub_actions.begin(), action.sub_actions.end());
    for (const Action& part : parts)
      if (!ready(part, rank)) return false;
    lowered_[rank].push_back(action);
    for (const Action& part : parts) {
      seen_[rank].insert(part);
      if (!has_comms(part)) continue;
      const bool forward = part.kind == ActionKind::Forward;
      emit(rank, make_action(part.stage, forward ? ActionKind::SendF : ActionKind::SendB,
                             part.microbatch));
      const Action recv =
          make_action(forward ? part.stage + 1 : part.stage - 1,
                      forward ? ActionKind::RecvF : ActionKind::RecvB, part.microbatch);
      emit(rank_of(recv.stage), recv);
    }
    ++next_[rank];
    return true;
  }

  const PipelineOrder& compute_order_;
  const std::vector<int>& stage_to_rank_;
  const int num_stages_;
  PipelineOrder lowered_;
  std::vector<std::unordered_set<Action, ActionHash>> seen_;  // per rank: actions placed
  std::vector<int> next_;                                     // per rank: next compute action
};

}  // namespace

PipelineOrder lower_to_communication(const PipelineOrder& compute_order,
                                     const std::vector<int>& stage_to_rank) {
  return Lowering(compute_order, stage_to_rank).run();
}

PipelineOrder strip_communication(const PipelineOrder& order) {
  PipelineOrder compute(order.size());
  for (std::size_t r = 0; r < order.size(); ++r) {
    for (const Action& a : order[r]) {
      if (!is_communication(a.kind)) compute[r].push_back(a);
    }
  }
  return compute;
}

}  // namespace tensorplay::schedules
