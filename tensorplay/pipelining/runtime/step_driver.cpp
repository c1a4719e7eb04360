// The step driver: dispatch a step to the local ranks, wait for their reports until the deadline,
// and on a failure or a timeout ask every rank what it does and tell the local ones to drop it.
#include "tensorplay/pipelining/runtime/detail/step_driver.h"

#include <algorithm>

#include "tensorplay/pipelining/runtime/schedule_options.h"

namespace tensorplay::pipelining::detail {

namespace {

/// The share of a step's time budget spent, after a timeout, on asking the ranks what they wait
/// for and on stopping them: the caller gets its error within step_timeout plus twice this.
std::chrono::milliseconds wind_down_budget(std::chrono::milliseconds step_timeout) {
  return std::clamp(step_timeout / 40, std::chrono::milliseconds(5),
                    std::chrono::milliseconds(1000));
}

}  // namespace

std::string StepOutcome::message(bool training) const {
  std::string out = failure;
  for (const std::string& s : stuck) out += " [" + s + ": it is not waited for]";
  if (training)
    out += " (gradients of this step are partial: zero_grad before retrying)";
  else
    out += " (eval computes no gradients; parameters are unchanged)";
  return out;
}

StepDriver::StepDriver(std::string name, std::chrono::milliseconds step_timeout)
    : name_(std::move(name)), step_timeout_(step_timeout) {}

void StepDriver::check_not_stuck(RankRuntime& ranks) {
  if (last_failed_step_ == 0) return;
  std::string busy = ranks.still_in(last_failed_step_);
  if (busy.empty()) {
    last_failed_step_ = 0;
    return;
  }
  throw PipelineError(name_ + ".step: step " + std::to_string(last_failed_step_) +
                      " failed and a stage is still in it (" + busy +
                      "); a step cannot start until every stage has returned (fix what keeps "
                      "the stage busy, or destroy this schedule and build a new one)");
}

std::string StepDriver::wait(RankRuntime& ranks, uint64_t step, Deadline deadline,
                             bool& timed_out) {
  int done = 0;
  const int expected = ranks.local_ranks();
  while (done < expected) {
    std::optional<RankReport> report = ranks.next_report(step, deadline);
    if (!report) {
      timed_out = true;
      return name_ + ": step " + std::to_string(step) + " did not finish within " +
             std::to_string(step_timeout_.count()) + " ms;";
    }
    if (!report->done) return ranks.describe_rank(report->rank) + " failed: " + report->what;
    ++done;
  }
  return {};
}

StepOutcome StepDriver::run(RankRuntime& ranks, std::shared_ptr<StepData> data) {
  const uint64_t step = data->step;
  const Deadline deadline = std::chrono::steady_clock::now() + step_timeout_;
  ranks.dispatch(std::move(data));
  StepOutcome out;
  bool timed_out = false;
  out.failure = wait(ranks, step, deadline, timed_out);
  if (out.ok()) return out;
  const auto wind_down = wind_down_budget(step_timeout_);
  // Ask every rank (in other processes too) what it waits for, with a short common deadline: a
  // rank computing answers through its status actor, a stopped process not at all.
  if (timed_out)
    out.failure += ranks.collect_status(step, std::chrono::steady_clock::now() + wind_down);
  // Quiesce the ranks before the hooks touch gradients: others may still be in a backward that
  // writes them. A rank stuck in compute is not waited for: the next step refuses to start
  // until it has returned.
  out.stuck = ranks.abort(step, std::chrono::steady_clock::now() + wind_down);
  last_failed_step_ = step;
  return out;
}

}  // namespace tensorplay::pipelining::detail
