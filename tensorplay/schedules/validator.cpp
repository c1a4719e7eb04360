#include "tensorplay/schedules/validator.h"

#include <algorithm>
#include <string>

#include "tensorplay/schedules/errors.h"

namespace tensorplay::schedules {
namespace {

// What has run for one (stage, microbatch).
struct Seen {
  bool forward = false;
  bool input_backward = false;  // I or B
  bool full_backward = false;
  bool weight = false;
};

// The sharding actions seen for one stage, and how many of its microbatches finished their
// weight gradient (B, or W after I).
struct StageSharding {
  bool unshard = false;
  bool reshard = false;
  bool reduce_grad = false;
  bool forward = false;  // any F of the stage ran
  int backward_done = 0;
};

class OrderChecker {
 public:
  OrderChecker(const PipelineOrder& order, int num_stages, int n_microbatches,
               const std::vector<int>* placement)
      : order_(order),
        num_stages_(num_stages),
        n_microbatches_(n_microbatches),
        placement_(placement),
        seen_(static_cast<std::size_t>(num_stages) * n_microbatches),
        sharding_(num_stages),
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
    if (!(is_compute(a.kind) || is_sharding(a.kind)) || a.kind == ActionKind::OverlapFB) {
      fail(rank, step,
           "expected a compute action (F, I, W, B, OVERLAP_F_B) or a sharding action (UNSHARD, "
           "RESHARD, REDUCE_GRAD) but got '" +
               to_string(a) + "'; strip communication actions before validating");
    }
    if (a.stage < 0 || a.stage >= num_stages_) {
      fail(
          rank, step,
          "stage " + std::to_string(a.stage) + " is outside 0.." + std::to_string(num_stages_ - 1));
    }
    if (is_sharding(a.kind)) {
      check_owner(a, rank, step);
      check_sharding(a, rank, step);
      return;
    }
    if (a.microbatch < 0 || a.microbatch >= n_microbatches_) {
      fail(rank, step,
           "microbatch " + std::to_string(a.microbatch) + " is outside 0.." +
               std::to_string(n_microbatches_ - 1));
    }
    check_owner(a, rank, step);
    Seen& s = seen_[static_cast<std::size_t>(a.stage) * n_microbatches_ + a.microbatch];
    StageSharding& sharding = count_for_sharding(a, rank, step);
    switch (a.kind) {
      case ActionKind::Forward:
        if (s.forward) fail(rank, step, "Forward for " + where(a) + " runs twice");
        s.forward = true;
        sharding.forward = true;
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

  // A compute action of a stage: none after its REDUCE_GRAD or RESHARD; B and W counted.
  StageSharding& count_for_sharding(const Action& a, int rank, int step) {
    StageSharding& sharding = sharding_[a.stage];
    if (sharding.reshard || sharding.reduce_grad) {
      fail(rank, step,
           to_string(a) + " runs after stage " + std::to_string(a.stage) + "'s " +
               (sharding.reduce_grad ? "REDUCE_GRAD" : "RESHARD") +
               ": place the stage's sharding actions after its last backward");
    }
    if (a.kind == ActionKind::FullBackward || a.kind == ActionKind::BackwardWeight)
      ++sharding.backward_done;
    return sharding;
  }

  void check_owner(const Action& a, int rank, int step) {
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
  }

  // UNSHARD before the stage's first F, REDUCE_GRAD after its last B or W, RESHARD after both
  // (and after every compute action of the stage), each at most once.
  void check_sharding(const Action& a, int rank, int step) {
    StageSharding& s = sharding_[a.stage];
    const std::string stage = "stage " + std::to_string(a.stage);
    const std::string name(kind_name(a.kind));
    bool& seen = a.kind == ActionKind::Unshard   ? s.unshard
                 : a.kind == ActionKind::Reshard ? s.reshard
                                                 : s.reduce_grad;
    if (seen) fail(rank, step, name + " of " + stage + " runs twice: once per step");
    seen = true;
    if (a.kind == ActionKind::Unshard && (s.forward || s.reshard)) {
      fail(rank, step,
           "UNSHARD of " + stage + " runs after its " + (s.reshard ? "RESHARD" : "first forward") +
               ": place it before the stage's first F");
    }
    if (a.kind == ActionKind::Unshard) return;
    if (s.backward_done < n_microbatches_) {
      fail(rank, step,
           name + " of " + stage + " runs after " + std::to_string(s.backward_done) + " of its " +
               std::to_string(n_microbatches_) +
               " weight gradients (B or W): place it after the stage's last backward");
    }
    if (a.kind == ActionKind::ReduceGrad && s.reshard) {
      fail(rank, step, "REDUCE_GRAD of " + stage + " runs after its RESHARD: place it before");
    }
  }

  void check_counts() const {
    if (placement_ && static_cast<int>(placement_->size()) != num_stages_) {
      fail_count("the placement lists " + std::to_string(placement_->size()) +
                 " stages but the order is checked for " + std::to_string(num_stages_));
    }
    for (int stage = 0; stage < num_stages_; ++stage) {
      for (int mb = 0; mb < n_microbatches_; ++mb) {
        const Seen& s = seen_[static_cast<std::size_t>(stage) * n_microbatches_ + mb];
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
  int n_microbatches_;
  const std::vector<int>* placement_;
  std::vector<Seen> seen_;
  std::vector<StageSharding> sharding_;
  std::vector<int> stage_rank_;
};

}  // namespace

std::vector<int> validate_order(const PipelineOrder& order, int num_stages, int n_microbatches,
                                const std::vector<int>* placement) {
  if (num_stages < 1 || n_microbatches < 1) {
    throw std::invalid_argument("validate_order needs num_stages >= 1 and n_microbatches >= 1");
  }
  std::vector<int> mapping = OrderChecker(order, num_stages, n_microbatches, placement).run();
  step_order(order, num_stages, n_microbatches);  // throws on deadlock
  return mapping;
}

namespace {

// Runs an order in lock steps: in each step every rank runs its next action if the actions it
// depends on ran in an earlier step.
class Stepper {
 public:
  Stepper(const PipelineOrder& order, int num_stages, int n_microbatches)
      : order_(order),
        num_stages_(num_stages),
        n_microbatches_(n_microbatches),
        forward_step_(static_cast<std::size_t>(num_stages) * n_microbatches, -1),
        backward_step_(forward_step_.size(), -1),
        stepped_(order.size()),
        next_(order.size(), 0) {}

  SteppedOrder run() {
    std::size_t remaining = 0;
    for (const auto& r : order_) remaining += r.size();
    for (int step = 0; remaining > 0; ++step) {
      bool progress = false;
      for (int rank = 0; rank < static_cast<int>(order_.size()); ++rank) {
        if (next_[rank] >= static_cast<int>(order_[rank].size())) continue;
        if (!run_next(rank, step)) continue;
        --remaining;
        progress = true;
      }
      if (!progress) {
        std::string stuck = describe_blocked_ranks(order_, next_);
        throw ScheduleError(
            "Deadlock at step " + std::to_string(step) +
            ": no rank can run its next action, each needs the output of an action queued behind "
            "another rank's blocked action:" +
            stuck + "\n\nFull pipeline schedule:\n" + format_pipeline_order(stepped_, step));
      }
    }
    return std::move(stepped_);
  }

 private:
  std::size_t index(const Action& a) const {
    return static_cast<std::size_t>(a.stage) * n_microbatches_ + a.microbatch;
  }
  bool in_range(const Action& a) const {
    return a.stage >= 0 && a.stage < num_stages_ && a.microbatch >= 0 &&
           a.microbatch < n_microbatches_;
  }
  // A dependency counts once it ran in an earlier step.
  bool ran_before(const std::vector<int>& steps, int stage, int mb, int step) const {
    int ran = steps[static_cast<std::size_t>(stage) * n_microbatches_ + mb];
    return ran >= 0 && ran < step;
  }
  bool ready(const Action& a, int step) const {
    if (!in_range(a)) return true;  // reported by validate_order
    if (a.kind == ActionKind::Forward) {
      return a.stage == 0 || ran_before(forward_step_, a.stage - 1, a.microbatch, step);
    }
    if (is_input_backward(a.kind)) {
      return a.stage == num_stages_ - 1 ||
             ran_before(backward_step_, a.stage + 1, a.microbatch, step);
    }
    return true;
  }
  void mark(const Action& a, int step) {
    if (!in_range(a)) return;
    if (a.kind == ActionKind::Forward) forward_step_[index(a)] = step;
    if (is_input_backward(a.kind)) backward_step_[index(a)] = step;
  }

  // Runs `rank`'s next action in `step` when it is ready (else the rank idles that step).
  bool run_next(int rank, int step) {
    const Action& a = order_[rank][next_[rank]];
    const bool overlap = a.kind == ActionKind::OverlapFB;
    const bool runs = overlap ? std::all_of(a.sub_actions.begin(), a.sub_actions.end(),
                                            [&](const Action& s) { return ready(s, step); })
                              : ready(a, step);
    if (!runs) {
      stepped_[rank].push_back(std::nullopt);
      return false;
    }
    stepped_[rank].push_back(a);
    if (overlap) {
      for (const Action& s : a.sub_actions) mark(s, step);
    } else {
      mark(a, step);
    }
    ++next_[rank];
    return true;
  }

  const PipelineOrder& order_;
  const int num_stages_, n_microbatches_;
  // Step at which F and I/B of (stage, mb) ran; -1 = not yet.
  std::vector<int> forward_step_, backward_step_;
  SteppedOrder stepped_;
  std::vector<int> next_;
};

}  // namespace

SteppedOrder step_order(const PipelineOrder& order, int num_stages, int n_microbatches) {
  return Stepper(order, num_stages, n_microbatches).run();
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
