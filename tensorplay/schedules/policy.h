// Schedule policies: the object a stage actor (or the simulator) asks "which pending action do I
// run next?". The same objects drive the real runtime and the discrete-event simulator.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tensorplay/schedules/action.h"
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
  /// Most activation bytes the rank may hold at once (0: no cap): a new microbatch is admitted
  /// only while the bytes held and reserved plus what it keeps on every local stage fit. Needs
  /// `activation_bytes`; must be at least one microbatch's bytes over the local stages.
  double max_activation_bytes = 0;
  /// Bytes an F keeps on each stage until its W or B (index = stage, or one value for every
  /// stage), e.g. MemoryCosts::kept_per_stage or a measured step's peak over its microbatches.
  std::vector<double> activation_bytes;
};

/// Our own schedule: any ready action, backward (I or B) before forward, later stages first, W
/// only when nothing else is ready, and new microbatches admitted only while the activation cap
/// leaves room to carry them through every local stage (so the cap cannot deadlock the rank).
/// Each kind runs in microbatch order per stage. Throws std::invalid_argument when the cap is
/// below the number of local stages (progress would be impossible) or a stage is out of range.
std::unique_ptr<SchedulePolicy> make_dynamic_policy(std::vector<int> local_stages, int num_stages,
                                                    int num_microbatches,
                                                    DynamicPolicyOptions options);

}  // namespace tensorplay::schedules
