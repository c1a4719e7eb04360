#include "tensorplay/schedules/simulator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>

#include "tensorplay/schedules/detail/event_queue.h"
#include "tensorplay/schedules/detail/static_order_policy.h"
#include "tensorplay/schedules/detail/static_sweep.h"
#include "tensorplay/schedules/detail/step_costs.h"
#include "tensorplay/schedules/errors.h"
#include "tensorplay/schedules/memory_model.h"
#include "tensorplay/schedules/ready_set.h"

namespace tensorplay::schedules {

// The simulator's own cache hint into a rank's ready set (not part of ReadySet's interface).
struct detail::ReadySetPrefetch {
  static void prefetch(const ReadySet& ready, int stage, int microbatch) {
    const ReadySet::Slot* slot = ready.find(stage);
    if (slot != nullptr && !slot->heap_ring.empty() && microbatch >= slot->base) {
      uint32_t distance = static_cast<uint32_t>(microbatch - slot->base);
      if (distance < slot->capacity) {
        __builtin_prefetch(slot->ring() + ((slot->head + distance) & (slot->capacity - 1)));
      }
    }
  }
};

namespace {

using detail::Event;
using detail::EventKind;
using detail::EventQueue;

// Everything the event loop touches for one rank, kept together in a few adjacent cache lines.
struct alignas(64) RankState {
  RankState(SchedulePolicy* p, int num_stages, int n_microbatches)
      : policy(p), eager(p->is_static_order()), ready(num_stages, n_microbatches) {}

  SchedulePolicy* policy;
  bool eager;  // the policy may be asked at once (static order): no need to wait for the instant
  bool busy = false;
  bool dirty = false;
  bool running_ahead = false;  // busy rebuilding activations ahead of a backward
  bool kept = false;           // ahead_stage's activations were kept by its F, not rebuilt
  bool running_kept = false;   // the running action keeps activations, or uses kept ones
  int stashed = 0;
  int peak = 0;
  // The backward whose activations were rebuilt ahead, or kept by its F, until it starts.
  int ahead_stage = -1;
  int ahead_microbatch = -1;
  double running_start = 0.0;
  double busy_time = 0.0;
  double first_start = -1.0;
  double last_end = 0.0;
  Action running;  // the running action (a plain value, OVERLAP_F_B's parts inline)
  ReadySet ready;  // last: a rank with few stages touches only its first lines
};

class Simulation {
 public:
  Simulation(const std::vector<SchedulePolicy*>& policies, const std::vector<int>& stage_to_rank,
             int n_microbatches, const CostModel& costs, const SimulationOptions& options)
      : policies_(policies),
        stage_to_rank_(stage_to_rank),
        // First: every argument is checked before any member uses it (step_costs_ reads each
        // stage's costs).
        num_stages_(checked_stages(policies, stage_to_rank, n_microbatches, costs, options)),
        n_microbatches_(n_microbatches),
        costs_(costs),
        step_costs_(costs, num_stages_),
        options_(options) {
    const int ranks = static_cast<int>(policies.size());
    for (int stage = 0; stage < num_stages_; ++stage)
      has_recompute_ = has_recompute_ || costs_.ahead(stage) > 0 ||
                       costs_.recomputation(stage) > 0 || recomputes_memory(stage);
    states_.reserve(ranks);
    for (int rank = 0; rank < ranks; ++rank) {
      policies[rank]->reset();
      static_policies_.push_back(dynamic_cast<detail::StaticOrderPolicy*>(policies[rank]));
      states_.emplace_back(policies[rank], num_stages_, n_microbatches);
    }
  }

  SimulationResult run() {
    if (std::optional<SimulationResult> swept = sweep()) return std::move(*swept);
    const int ranks = static_cast<int>(policies_.size());
    for (int rank = 0; rank < ranks; ++rank) mark_dirty(rank);
    start_dirty(0.0);
    std::vector<Event> bucket;
    while (!events_.empty()) {
      const double now = events_.next_time();
      // Everything that happens at `now` (zero-cost transfers included) lands before any idle
      // rank picks its next action, so a policy sees all of it.
      while (!events_.empty() && events_.next_time() == now) {
        events_.pop_bucket(bucket);
        for (std::size_t i = 0; i < bucket.size(); ++i) {
          // Three-stage prefetch: a rank's state far ahead, then (once that is in cache) the
          // state of the peer its finishing action will hand its output to, then the peer's flags.
          if (i + 3 * kPrefetchDistance < bucket.size()) {
            prefetch(bucket[i + 3 * kPrefetchDistance].rank);
          }
          if (i + 2 * kPrefetchDistance < bucket.size()) {
            prefetch_peer_state(bucket[i + 2 * kPrefetchDistance]);
          }
          if (i + kPrefetchDistance < bucket.size()) {
            prefetch_peer(bucket[i + kPrefetchDistance]);
            if (const auto* p = static_policies_[bucket[i + kPrefetchDistance].rank])
              p->prefetch_next();
          }
          handle(bucket[i], now);
        }
      }
      start_dirty(now);
    }
    check_finished();
    return finish();
  }

 private:
  // The number of stages, once the arguments are checked: ranks, stages, microbatches, the
  // placement, the policies, and the cost lists long enough for every stage (and the memory
  // model, where predict_memory will replay it), so that nothing is read before it is checked.
  static int checked_stages(const std::vector<SchedulePolicy*>& policies,
                            const std::vector<int>& stage_to_rank, int n_microbatches,
                            const CostModel& costs, const SimulationOptions& options) {
    const int ranks = static_cast<int>(policies.size());
    const int num_stages = static_cast<int>(stage_to_rank.size());
    if (ranks < 1) throw std::invalid_argument("simulate needs at least one rank's policy");
    if (num_stages < 1 || n_microbatches < 1) {
      throw std::invalid_argument("simulate needs at least one stage and one microbatch");
    }
    for (int stage = 0; stage < num_stages; ++stage) {
      if (stage_to_rank[stage] < 0 || stage_to_rank[stage] >= ranks) {
        throw std::invalid_argument("stage " + std::to_string(stage) + " is placed on rank " +
                                    std::to_string(stage_to_rank[stage]) + " but there are " +
                                    std::to_string(ranks) + " ranks");
      }
    }
    costs.check(num_stages);
    if (options.record_timeline && !costs.memory.empty()) costs.memory.check(num_stages);
    for (const SchedulePolicy* policy : policies)
      if (policy == nullptr) throw std::invalid_argument("null policy for a rank");
    return num_stages;
  }

  // Thousands of ranks touched in turn do not fit the caches: fetch a rank's state a few events
  // ahead of its use.
  static constexpr std::size_t kPrefetchDistance = 8;
  void prefetch(int rank) const {
    const char* state = reinterpret_cast<const char*>(&states_[rank]);
    // The leading lines only: the scalars and the first ReadySet slots (the rest is rarely used).
    for (std::size_t line = 0; line < std::min<std::size_t>(sizeof(RankState), 192); line += 64) {
      __builtin_prefetch(state + line);
    }
    // From the dense pointer array: reading it from the state would wait for that state's line.
    __builtin_prefetch(policies_[rank]);
  }

  // The rank that `event`'s finishing action hands its output to, or -1.
  int peer_of(const Event& event) const {
    if (event.kind != EventKind::ComputeDone) return -1;
    const RankState& state = states_[event.rank];
    if (state.running_ahead) return -1;
    const Action& action = state.running;
    if (!action.sub_actions.empty()) return -1;
    if (action.kind == ActionKind::Forward && action.stage + 1 < num_stages_) {
      return stage_to_rank_[action.stage + 1];
    }
    if (is_input_backward(action.kind) && action.stage > 0) return stage_to_rank_[action.stage - 1];
    return -1;
  }

  void prefetch_peer_state(const Event& event) const {
    const int peer = peer_of(event);
    if (peer >= 0) prefetch(peer);
  }

  void prefetch_peer(const Event& event) const {
    if (event.kind != EventKind::ComputeDone) return;
    const RankState& state = states_[event.rank];
    if (state.running_ahead) return;
    const Action& action = state.running;
    if (!action.sub_actions.empty()) return;
    if (action.kind == ActionKind::Forward && action.stage + 1 < num_stages_) {
      const RankState& peer = states_[stage_to_rank_[action.stage + 1]];
      __builtin_prefetch(&peer);
      detail::ReadySetPrefetch::prefetch(peer.ready, action.stage + 1, action.microbatch);
    } else if (is_input_backward(action.kind) && action.stage > 0) {
      const RankState& peer = states_[stage_to_rank_[action.stage - 1]];
      __builtin_prefetch(&peer);
      detail::ReadySetPrefetch::prefetch(peer.ready, action.stage - 1, action.microbatch);
    }
  }

  void push(double time, int rank, EventKind kind, int stage, int microbatch) {
    events_.push(time, rank, kind, stage, microbatch);
  }

  // An arrival due now lands at once (the batch at `now` is still open); later ones are queued.
  void deliver(double now, double time, int rank, EventKind kind, int stage, int microbatch) {
    if (time == now) {
      handle(Event{rank, kind, stage, microbatch}, now);
    } else {
      push(time, rank, kind, stage, microbatch);
    }
  }

  void mark_dirty(int rank) {
    if (states_[rank].dirty) return;
    states_[rank].dirty = true;
    dirty_.push_back(rank);
  }

  // Lets every rank touched at `now` that is idle ask its policy for work. The order does not
  // matter: a rank's choice depends only on its own state.
  void start_dirty(double now) {
    for (std::size_t i = 0; i < dirty_.size(); ++i) {
      if (i + kPrefetchDistance < dirty_.size()) prefetch(dirty_[i + kPrefetchDistance]);
      int rank = dirty_[i];
      states_[rank].dirty = false;
      try_start(rank, now);
    }
    dirty_.clear();
  }

  void try_start(int rank, double now) {
    RankState& state = states_[rank];
    if (state.busy) return;
    const std::optional<Action> next = state.policy->next(state.ready);
    if (!next) {
      if (has_recompute_) start_ahead(rank, now);
      return;
    }
    state.busy = true;
    // Field by field: the policy has just built `next` in narrower stores, and a whole-object
    // copy's wide loads would wait for them (no store forwarding).
    state.running.stage = next->stage;
    state.running.kind = next->kind;
    state.running.microbatch = next->microbatch;
    if (next->sub_actions.empty()) {
      state.running.sub_actions = SubActions{};
    } else {
      state.running.sub_actions = next->sub_actions;
    }
    state.running_start = now;
    state.stashed += activations_taken(state.running);
    double duration = duration_of(state.running);
    if (has_recompute_) duration -= recomputation_skipped(state);
    state.peak = std::max(state.peak, state.stashed);
    if (state.first_start < 0) state.first_start = now;
    push(now + duration, rank, EventKind::ComputeDone, 0, 0);
  }

  // Whether the memory model has `stage` recompute (its F then keeps its activations before its
  // own backward, whatever the time costs say).
  bool recomputes_memory(int stage) const {
    const std::vector<int>& r = costs_.memory.recompute;
    if (r.empty() || (r.size() > 1 && static_cast<std::size_t>(stage) >= r.size())) return false;
    return costs_.memory.recomputes(stage);
  }

  // What the starting action need not recompute: its F kept the activations (the F ran right
  // before it in the rank's order: is_backward_of, as the runtime's stage workers decide), or the
  // rank rebuilt them ahead while it waited. An F followed by its backward marks it.
  double recomputation_skipped(RankState& state) {
    const Action& action = state.running;
    state.running_kept = false;
    if (action.kind == ActionKind::Forward) {
      // Asks the policy only if the stage recomputes, in time or in bytes.
      if (costs_.recomputation(action.stage) <= 0 && !recomputes_memory(action.stage)) return 0.0;
      const std::optional<Action> next = state.policy->next_in_order();
      if (next && is_backward_of(*next, action)) {
        state.ahead_stage = action.stage;
        state.ahead_microbatch = action.microbatch;
        state.kept = state.running_kept = true;
      }
      return 0.0;
    }
    if (state.ahead_stage != action.stage || state.ahead_microbatch != action.microbatch ||
        !is_input_backward(action.kind))
      return 0.0;
    state.running_kept = state.kept;
    const double skipped =
        state.kept ? costs_.recomputation(action.stage) : costs_.ahead(action.stage);
    state.ahead_stage = state.ahead_microbatch = -1;
    state.kept = false;
    return skipped;
  }

  // The rank waits: when its order's next action is the backward of a stage that may recompute
  // ahead, the rank rebuilds that microbatch's activations meanwhile, once (as the runtime's
  // stage workers do). Its busy time counts; it is no action of the order.
  void start_ahead(int rank, double now) {
    RankState& state = states_[rank];
    const std::optional<Action> wanted = state.policy->next_in_order();
    if (!wanted || !wanted->sub_actions.empty() || !is_input_backward(wanted->kind)) return;
    if (state.ahead_stage == wanted->stage && state.ahead_microbatch == wanted->microbatch) return;
    const double rebuild = costs_.ahead(wanted->stage);
    if (rebuild <= 0) return;
    state.busy = true;
    state.running_ahead = true;
    state.ahead_stage = wanted->stage;
    state.ahead_microbatch = wanted->microbatch;
    state.running_start = now;
    if (state.first_start < 0) state.first_start = now;
    push(now + rebuild, rank, EventKind::ComputeDone, 0, 0);
  }

  // Static orders that recompute nothing ahead need no event loop: their times follow from one
  // sweep over the orders (detail/static_sweep.h), the same to the bit and many times faster.
  // Empty when the sweep does not apply, or when the orders cannot finish (the event loop then
  // names what each rank waits for).
  std::optional<SimulationResult> sweep() {
    if (has_recompute_) return std::nullopt;
    for (const detail::StaticOrderPolicy* p : static_policies_)
      if (p == nullptr) return std::nullopt;
    std::optional<detail::SweepOutcome> outcome = detail::sweep_static_orders(
        static_policies_, stage_to_rank_, n_microbatches_, step_costs_, options_.record_timeline);
    if (!outcome) return std::nullopt;
    for (std::size_t rank = 0; rank < states_.size(); ++rank) {
      const detail::SweepRank& figures = outcome->ranks[rank];
      RankState& state = states_[rank];
      state.busy_time = figures.busy;
      state.first_start = figures.first_start;
      state.last_end = figures.last_end;
      state.peak = figures.peak;
      static_policies_[rank]->mark_finished();
    }
    result_.actions = outcome->actions;
    result_.timeline = std::move(outcome->timeline);
    return finish();
  }

  double duration_of(const Action& action) const { return step_costs_.duration(action); }
  double transfer_after(int stage) const { return step_costs_.transfer_after(stage); }

  void handle(const Event& event, double now) {
    switch (event.kind) {
      case EventKind::InputArrived:
        states_[event.rank].ready.input_arrived(event.stage, event.microbatch);
        break;
      case EventKind::GradArrived:
        states_[event.rank].ready.grad_arrived(event.stage, event.microbatch);
        break;
      case EventKind::ComputeDone:
        complete(event.rank, now);
        break;
    }
    wake(event.rank, now);
  }

  // The rank's state changed at `now`: a static-order rank tries to start right away (while its
  // state is in cache); any other waits until every event of this instant has landed.
  void wake(int rank, double now) {
    if (states_[rank].eager) {
      try_start(rank, now);
    } else {
      mark_dirty(rank);
    }
  }

  void complete(int rank, double now) {
    RankState& state = states_[rank];
    if (state.running_ahead) {
      state.running_ahead = false;
      state.busy = false;
      state.busy_time += now - state.running_start;
      state.last_end = now;
      return;
    }
    const Action action = state.running;
    state.policy->completed(action);
    state.busy_time += now - state.running_start;
    state.last_end = now;
    ++result_.actions;
    if (options_.record_timeline) {
      result_.timeline.push_back(
          TimelineEvent{rank, action, state.running_start, now, state.running_kept});
    }
    state.stashed -= activations_freed(action);
    if (action.sub_actions.empty()) {
      state.ready.completed(action.stage, action.kind, action.microbatch);
      hand_over(rank, now, action.stage, action.kind, action.microbatch);
    } else {
      state.ready.completed(action);
      for (const Action& part : action.sub_actions)
        hand_over(rank, now, part.stage, part.kind, part.microbatch);
    }
    state.busy = false;
  }

  // Outputs for a stage on another rank travel over the link.
  void hand_over(int rank, double now, int stage, ActionKind kind, int microbatch) {
    if (kind == ActionKind::Forward && stage + 1 < num_stages_) {
      int peer = stage_to_rank_[stage + 1];
      if (peer != rank) {
        deliver(now, now + transfer_after(stage), peer, EventKind::InputArrived, stage + 1,
                microbatch);
      }
    } else if (is_input_backward(kind) && stage > 0) {
      int peer = stage_to_rank_[stage - 1];
      if (peer != rank) {
        deliver(now, now + transfer_after(stage - 1), peer, EventKind::GradArrived, stage - 1,
                microbatch);
      }
    }
  }

  void check_finished() const {
    std::string stuck;
    int count = 0;
    for (std::size_t rank = 0; rank < policies_.size(); ++rank) {
      if (policies_[rank]->finished()) continue;
      if (++count <= 16) {
        stuck += "\n  rank " + std::to_string(rank) + ": " +
                 policies_[rank]->describe_wait(states_[rank].ready);
      }
    }
    if (count == 0) return;
    if (count > 16) stuck += "\n  ... and " + std::to_string(count - 16) + " more ranks";
    throw ScheduleError("simulation deadlocked: " + std::to_string(count) +
                        " rank(s) cannot finish their step; nothing is running or in flight" +
                        stuck);
  }

  SimulationResult finish() {
    const int ranks = static_cast<int>(policies_.size());
    for (const RankState& state : states_) {
      result_.busy.push_back(state.busy_time);
      result_.first_start.push_back(state.first_start);
      result_.last_end.push_back(state.last_end);
      result_.peak_activations.push_back(state.peak);
    }
    double makespan = 0.0;
    double span = 0.0;
    for (int rank = 0; rank < ranks; ++rank) {
      makespan = std::max(makespan, result_.last_end[rank]);
      if (result_.first_start[rank] < 0) result_.first_start[rank] = 0.0;
      span = std::max(span, result_.last_end[rank] - result_.first_start[rank]);
    }
    result_.makespan = makespan;
    result_.span = span;
    result_.idle.resize(ranks);
    double idle_sum = 0.0;
    for (int rank = 0; rank < ranks; ++rank) {
      result_.idle[rank] = makespan - result_.busy[rank];
      idle_sum += result_.idle[rank];
    }
    result_.bubble_fraction = makespan > 0 ? idle_sum / (ranks * makespan) : 0.0;
    if (options_.record_timeline) {
      std::stable_sort(result_.timeline.begin(), result_.timeline.end(),
                       [](const TimelineEvent& a, const TimelineEvent& b) {
                         return a.start != b.start ? a.start < b.start : a.rank < b.rank;
                       });
    }
    return std::move(result_);
  }

  const std::vector<SchedulePolicy*>& policies_;
  const std::vector<int>& stage_to_rank_;
  int num_stages_;
  int n_microbatches_;
  const CostModel& costs_;
  detail::StepCosts step_costs_;
  SimulationOptions options_;
  std::vector<RankState> states_;
  // Per rank: its policy when it is the static-order one (for its cache hint), else null.
  std::vector<detail::StaticOrderPolicy*> static_policies_;
  bool has_recompute_ = false;  // some stage may recompute ahead, or keep its activations
  EventQueue events_;
  std::vector<int> dirty_;
  SimulationResult result_;
};

}  // namespace

SimulationResult simulate(const std::vector<SchedulePolicy*>& policies,
                          const std::vector<int>& stage_to_rank, int n_microbatches,
                          const CostModel& costs, const SimulationOptions& options) {
  SimulationResult result =
      Simulation(policies, stage_to_rank, n_microbatches, costs, options).run();
  if (options.record_timeline && !costs.memory.empty()) {
    MemoryPrediction memory = predict_memory(result, stage_to_rank, costs.memory);
    result.peak_activation_bytes = std::move(memory.peak_activation_bytes);
    result.peak_bytes = std::move(memory.peak_bytes);
    result.memory_track = std::move(memory.track);
  }
  return result;
}

SimulationResult simulate_order(const PipelineOrder& order, const std::vector<int>& stage_to_rank,
                                int n_microbatches, const CostModel& costs,
                                const SimulationOptions& options) {
  std::vector<std::unique_ptr<SchedulePolicy>> owned;
  std::vector<SchedulePolicy*> policies;
  owned.reserve(order.size());
  for (const RankOrder& rank : order) {
    owned.push_back(make_static_order_policy(rank));
    policies.push_back(owned.back().get());
  }
  return simulate(policies, stage_to_rank, n_microbatches, costs, options);
}

}  // namespace tensorplay::schedules
