#include "schedules/validator.h"

#include <algorithm>
#include <string>

#include "schedules/errors.h"

namespace tensorplay::schedules {
namespace {

// What has run for one (stage, microbatch).
struct Seen {
  bool forward = false;
  bool input_backward = false;  // I or B
  bool full_backward = false;
  bool weight = false;
};

class OrderChecker {
 public:
  OrderChecker(const PipelineOrder& order, int num_stages, int num_microbatches,
               const std::vector<int>* placement)
      : order_(order),
        num_stages_(num_stages),
        num_microbatches_(num_microbatches),
        placement_(placement),
        seen_(static_cast<std::size_t>(num_stages) * num_microbatches),
        stage_rank_(num_stages, -1) {}

  std::vector<int> run() {
    for (int rank = 0; rank < static_cast<int>(order_.size()); ++rank) {
      for (int step = 0; step < static_cast<int>(order_[rank].size()); ++step) {
        const Action& action = order_[rank][step];
        if (action.kind == ActionKind::OverlapFB) {
          if (action.sub_actions.empty()) fail(rank, step, "OVERLAP_F_B without sub-actions");
          for (const Action& sub : action.sub_actions) check(sub, rank, step);
        } else {
          check(action, rank, step);
        }
      }
    }
    check_counts();
    return stage_rank_;
  }

 private:
  [[noreturn]] void fail(int rank, int step, const std::string& what) const {
    throw ScheduleError("Rank " + std::to_string(rank) + ", step " + std::to_string(step) + ": " +
                        what + "\n\nFull pipeline schedule:\n" +
                        format_pipeline_order(order_, step));
  }
  [[noreturn]] void fail_count(const std::string& what) const {
    throw ScheduleError(what + "\n\nFull pipeline schedule:\n" + format_pipeline_order(order_));
  }

  static std::string where(const Action& a) {
    return "stage " + std::to_string(a.stage) + ", microbatch " + std::to_string(a.microbatch);
  }

  void check(const Action& a, int rank, int step) {
    if (!is_compute(a.kind) || a.kind == ActionKind::OverlapFB) {
      fail(rank, step,
           "expected a compute action (F, I, W, B, OVERLAP_F_B) but got '" + to_string(a) +
               "'; strip communication actions before validating");
    }
    if (a.stage < 0 || a.stage >= num_stages_) {
      fail(
          rank, step,
          "stage " + std::to_string(a.stage) + " is outside 0.." + std::to_string(num_stages_ - 1));
    }
    if (a.microbatch < 0 || a.microbatch >= num_microbatches_) {
      fail(rank, step,
           "microbatch " + std::to_string(a.microbatch) + " is outside 0.." +
               std::to_string(num_microbatches_ - 1));
    }
    int& owner = stage_rank_[a.stage];
    if (owner == -1) owner = rank;
    if (owner != rank) {
      fail(rank, step,
           "Stage " + std::to_string(a.stage) + " is assigned to both rank " +
               std::to_string(rank) + " and rank " + std::to_string(owner));
    }
    if (placement_ && (*placement_)[a.stage] != rank) {
      fail(rank, step,
           "Stage " + std::to_string(a.stage) + " runs on rank " + std::to_string(rank) +
               " but the placement puts it on rank " + std::to_string((*placement_)[a.stage]));
    }
    Seen& s = seen_[static_cast<std::size_t>(a.stage) * num_microbatches_ + a.microbatch];
    switch (a.kind) {
      case ActionKind::Forward:
        if (s.forward) fail(rank, step, "Forward for " + where(a) + " runs twice");
        s.forward = true;
        break;
      case ActionKind::FullBackward:
      case ActionKind::BackwardInput: {
        const char* name = a.kind == ActionKind::FullBackward ? "Full Backward" : "Backward Input";
        if (!s.forward) {
          fail(rank, step,
               std::string("Running ") + name + " for " + where(a) +
                   " without first running Forward");
        }
        if (s.input_backward) fail(rank, step, "a second backward for " + where(a));
        s.input_backward = true;
        s.full_backward = a.kind == ActionKind::FullBackward;
        break;
      }
      case ActionKind::BackwardWeight:
        if (!s.input_backward || s.full_backward) {
          fail(rank, step,
               "Running Backward Weight for " + where(a) + " without first running Backward Input");
        }
        if (s.weight) fail(rank, step, "Backward Weight for " + where(a) + " runs twice");
        s.weight = true;
        break;
      default:
        break;
    }
  }

  void check_counts() const {
    if (placement_ && static_cast<int>(placement_->size()) != num_stages_) {
      fail_count("the placement lists " + std::to_string(placement_->size()) +
                 " stages but the order is checked for " + std::to_string(num_stages_));
    }
    for (int stage = 0; stage < num_stages_; ++stage) {
      for (int mb = 0; mb < num_microbatches_; ++mb) {
        const Seen& s = seen_[static_cast<std::size_t>(stage) * num_microbatches_ + mb];
        std::string at = "stage " + std::to_string(stage) + ", microbatch " + std::to_string(mb);
        if (!s.forward) fail_count("Missing Forward for " + at);
        if (!s.input_backward) fail_count("Missing backward (B or I) for " + at);
        if (!s.full_backward && !s.weight) {
          fail_count("Missing Backward Weight (W) for " + at + ": its I ran but W never did");
        }
      }
    }
  }

  const PipelineOrder& order_;
  int num_stages_;
  int num_microbatches_;
  const std::vector<int>* placement_;
  std::vector<Seen> seen_;
  std::vector<int> stage_rank_;
};

}  // namespace

std::vector<int> validate_order(const PipelineOrder& order, int num_stages, int num_microbatches,
                                const std::vector<int>* placement) {
  if (num_stages < 1 || num_microbatches < 1) {
    throw std::invalid_argument("validate_order needs num_stages >= 1 and num_microbatches >= 1");
  }
  std::vector<int> mapping = OrderChecker(order, num_stages, num_microbatches, placement).run();
  step_order(order, num_stages, num_microbatches);  // throws on deadlock
  return mapping;
}

SteppedOrder step_order(const PipelineOrder& order, int num_stages, int num_microbatches) {
  const std::size_t cells = static_cast<std::size_t>(num_stages) * num_microbatches;
  // Step at which F and I/B of (stage, mb) ran; -1 = not yet.
  std::vector<int> forward_step(cells, -1);
  std::vector<int> backward_step(cells, -1);
  auto index = [&](const Action& a) {
    return static_cast<std::size_t>(a.stage) * num_microbatches + a.microbatch;
  };
  auto in_range = [&](const Action& a) {
    return a.stage >= 0 && a.stage < num_stages && a.microbatch >= 0 &&
           a.microbatch < num_microbatches;
  };
  // A dependency counts once it ran in an earlier step.
  auto ran_before = [&](const std::vector<int>& steps, int stage, int mb, int step) {
    int ran = steps[static_cast<std::size_t>(stage) * num_microbatches + mb];
    return ran >= 0 && ran < step;
  };
  auto sub_ready = [&](const Action& a, int step) {
    if (!in_range(a)) return true;  // reported by validate_order
    if (a.kind == ActionKind::Forward) {
      return a.stage == 0 || ran_before(forward_step, a.stage - 1, a.microbatch, step);
    }
    if (is_input_backward(a.kind)) {
      return a.stage == num_stages - 1 ||
             ran_before(backward_step, a.stage + 1, a.microbatch, step);
    }
    return true;
  };

  const int ranks = static_cast<int>(order.size());
  SteppedOrder stepped(ranks);
  std::vector<int> next(ranks, 0);
  std::size_t remaining = 0;
  for (const auto& r : order) remaining += r.size();
  for (int step = 0; remaining > 0; ++step) {
    bool progress = false;
    for (int rank = 0; rank < ranks; ++rank) {
      if (next[rank] >= static_cast<int>(order[rank].size())) continue;
      const Action& a = order[rank][next[rank]];
      bool ready = a.kind == ActionKind::OverlapFB
                       ? std::all_of(a.sub_actions.begin(), a.sub_actions.end(),
                                     [&](const Action& s) { return sub_ready(s, step); })
                       : sub_ready(a, step);
      if (!ready) {
        stepped[rank].push_back(std::nullopt);
        continue;
      }
      stepped[rank].push_back(a);
      auto mark = [&](const Action& s) {
        if (!in_range(s)) return;
        if (s.kind == ActionKind::Forward) forward_step[index(s)] = step;
        if (is_input_backward(s.kind)) backward_step[index(s)] = step;
      };
      if (a.kind == ActionKind::OverlapFB) {
        for (const Action& s : a.sub_actions) mark(s);
      } else {
        mark(a);
      }
      ++next[rank];
      --remaining;
      progress = true;
    }
    if (!progress) {
      std::string stuck = describe_blocked_ranks(order, next);
      throw ScheduleError("Deadlock at step " + std::to_string(step) +
                          ": no rank can run its next action, each needs the output of an action "
                          "queued behind another rank's blocked action:" +
                          stuck + "\n\nFull pipeline schedule:\n" +
                          format_pipeline_order(stepped, step));
    }
  }
  return stepped;
}

namespace {
// One more than the largest value of `field` over every action and sub-action.
int count_beyond(const PipelineOrder& order, int Action::*field) {
  int count = 0;
  for (const auto& rank : order) {
    for (const Action& a : rank) {
      count = std::max(count, a.*field + 1);
      for (const Action& s : a.sub_actions) count = std::max(count, s.*field + 1);
    }
  }
  return count;
}
}  // namespace

int count_stages(const PipelineOrder& order) { return count_beyond(order, &Action::stage); }

int count_microbatches(const PipelineOrder& order) {
  return count_beyond(order, &Action::microbatch);
}

}  // namespace tensorplay::schedules
