// Schedule policies: the object a stage actor (or the simulator) asks "which pending action do I
// run next?". The same objects drive the real runtime and the discrete-event simulator.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tensorplay/schedules/action.h"
#include "tensorplay/schedules/memory_costs.h"
#include "tensorplay/schedules/ready_set.h"

namespace tensorplay::schedules {

/// Chooses one rank's next compute action. Protocol per step: call next() whenever the rank can
/// start work; an action it returns is handed to the caller (it is not returned again) and must
/// be reported with completed() when it ends; finished() turns true once every action of the
/// step completed; reset() starts the next step.
class SchedulePolicy {
 public:
  virtual ~SchedulePolicy() = default;
  /// The action to run now, or nullopt to wait for an arrival or a completion.
  virtual std::optional<Action> next(const ReadySet& ready) = 0;
  /// An action handed out by next() finished.
  virtual void completed(const Action& action) = 0;
  /// Every action of this step completed.
  virtual bool finished() const = 0;
  /// Starts the next step.
  virtual void reset() = 0;
  /// What the policy waits for, e.g. "waiting for 1B3: gradient not arrived" (for timeouts).
  virtual std::string describe_wait(const ReadySet& ready) const = 0;
  /// Compute actions this policy runs per step.
  virtual std::size_t total_actions() const = 0;
  /// True when next() only checks whether the next action of a fixed order is ready: asking it
  /// earlier or later within one instant then gives the same answer, so the simulator may ask
  /// as soon as the rank's state changes instead of after every event of that instant.
  virtual bool is_static_order() const { return false; }
  /// The action next() will hand out once it is ready, where the policy follows a fixed order
  /// (the static-order policy); nullopt where it picks among ready actions, or has none left. A
  /// rank uses it to prepare while it waits (a recomputation ahead of its backward).
  virtual std::optional<Action> next_in_order() const { return std::nullopt; }
};

/// Follows `compute_order` strictly and waits for the next action's inputs. Throws
/// std::invalid_argument if the order holds communication actions (lower them away first).
std::unique_ptr<SchedulePolicy> make_static_order_policy(RankOrder compute_order);

/// Options of the dynamic policy.
struct DynamicPolicyOptions {
  /// Run backward as I then W (W deferred until nothing else is ready) instead of one B.
  bool split_backward = false;
  /// Most activations the rank may hold at once (an F's activation is held until its W or B
  /// ends); 0 means no cap. Must be at least the number of local stages.
  int max_stashed_activations = 0;
  /// Most activation bytes the rank may hold at once (0: no cap), counted as the runtime's
  /// memory_stats() counts a rank's peak_activation_bytes: what its stages keep for their
  /// backwards, their outputs on their way to the next stage, and the workspace of the action
  /// running. A new microbatch is admitted only while the bytes held and reserved, plus what it
  /// keeps and sends on every local stage, plus the largest workspace of a local stage, fit, so
  /// the rank's peak never exceeds the cap. Not counted: the outputs a step returns (the last
  /// stage's; ask for none with StepOptions::return_outputs = false). Needs `activation_bytes`;
  /// a cap below what one microbatch needs at its peak (kept + sent over the local stages plus
  /// the largest workspace) is refused at construction, naming the least cap that holds.
  double max_activation_bytes = 0;
  /// Bytes an F keeps on each stage until its W or B (index = stage, or one value for every
  /// stage), e.g. MemoryCosts::kept_per_stage or a measured step's peak over its microbatches.
  std::vector<double> activation_bytes;
  /// Bytes of each stage's outputs on their way to the next stage (index = stage, or one value;
  /// empty: none): the cap counts them with the microbatch until its backward frees it.
  std::vector<double> sent_bytes;
  /// The most an action of each stage holds while it runs beyond what it keeps (index = stage,
  /// or one value; empty: none): the backward's workspace, recomputed activations, gradients on
  /// their way. MemoryCosts::workspace_per_stage gives it.
  std::vector<double> workspace_bytes;

  /// Sets the byte cap and the bytes it counts from memory costs (kept, sent and workspace bytes
  /// of each of the `num_stages` stages).
  void cap_activation_bytes(double cap, const MemoryCosts& costs, int num_stages);
};

/// Our own schedule: any ready action, backward (I or B) before forward, later stages first, W
/// only when nothing else is ready, and new microbatches admitted only while the activation cap
/// leaves room to carry them through every local stage (so the cap cannot deadlock the rank).
/// Each kind runs in microbatch order per stage. Throws std::invalid_argument when the cap is
/// below the number of local stages (progress would be impossible) or a stage is out of range.
std::unique_ptr<SchedulePolicy> make_dynamic_policy(std::vector<int> local_stages, int num_stages,
                                                    int n_microbatches,
                                                    DynamicPolicyOptions options);

}  // namespace tensorplay::schedules
