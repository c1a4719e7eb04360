// Stages whose forward, input-gradient backward (I) and weight-gradient backward (W) are waits of
// an exact length (a custom op with its own autograd node), so a pipeline's measured makespan can
// be held against the simulator's for the same order and costs. Shared by the runtime benchmarks.
#pragma once

#include <sys/prctl.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "tensorplay/core/autograd/node.h"
#include "tensorplay/pipelining/pipeline_stage.h"
#include "tensorplay/schedules/cost_model.h"
#include "tensorplay/tensor.h"

namespace timed_stage {

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;

/// Waits `duration` exactly: sleeps until shortly before the end (with the thread's timer slack
/// at 1 us), then spins, yielding, to the end. The margin covers a sleep's wake-up latency, which
/// is under 100 us on bare metal but often 90-160 us, with a tail past 500 us, in a virtual machine
/// (measured on 2-core cloud machines); a margin below it makes every wait late.
inline void wait_exactly(std::chrono::microseconds duration) {
  thread_local bool slack_set = false;
  if (!slack_set) {
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    slack_set = true;
  }
  using clock = std::chrono::steady_clock;
  const auto end = clock::now() + duration;
  const auto spin = std::chrono::microseconds(400);
  if (duration > spin) std::this_thread::sleep_until(end - spin);
  while (clock::now() < end) std::this_thread::yield();
}

/// What the waits really took, summed over every stage since the last reset: a virtual machine's
/// scheduler can make a wait late however it is made, and a comparison with the simulator should
/// hold the runtime to the waits it got, not to the ones it asked for.
struct WaitTally {
  std::atomic<int64_t> ns[3]{};  // forward, input backward, weight backward
  std::atomic<int64_t> count[3]{};
  void reset() {
    for (int k = 0; k < 3; ++k) ns[k] = count[k] = 0;
  }
  /// The mean wait of kind `k` in milliseconds, or `fallback_ms` when none ran.
  double mean_ms(int k, double fallback_ms) const {
    return count[k] > 0 ? ns[k] / 1e6 / count[k] : fallback_ms;
  }
};
inline WaitTally& wait_tally() {
  static WaitTally tally;
  return tally;
}

/// wait_exactly, with the time it really took added to the tally under kind `k`.
inline void tallied_wait(int k, std::chrono::microseconds duration) {
  const auto t0 = std::chrono::steady_clock::now();
  wait_exactly(duration);
  const auto ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0);
  wait_tally().ns[k] += ns.count();
  wait_tally().count[k] += 1;
}

/// The waits of one stage.
struct Waits {
  std::chrono::microseconds forward{2000}, input_backward{2000}, weight_backward{2000};
};

/// The backward of timed(x, w): the input's gradient after an I wait, the weight's after a W wait.
class TimedBackward : public tp::autograd::Node {
 public:
  TimedBackward(Waits waits, tp::Shape weight_shape)
      : waits_(waits), weight_shape_(std::move(weight_shape)) {}
  const char* name() const override { return "TimedBackward"; }
  std::vector<tp::Tensor> apply(const tp::Tensor& grad, const std::vector<bool>& needed) override {
    std::vector<tp::Tensor> out(2);
    if (needed[0]) {
      tallied_wait(1, waits_.input_backward);
      out[0] = grad;
    }
    if (needed[1]) {
      tallied_wait(2, waits_.weight_backward);
      out[1] = tp::zeros(weight_shape_);
    }
    return out;
  }

 private:
  Waits waits_;
  tp::Shape weight_shape_;
};

/// A stage module: passes its input on after the forward wait; backward waits as above. Its
/// weight has `weight_numel` elements (gradients of that size, e.g. for data-parallel averaging).
class TimedModule : public tp::nn::Module {
 public:
  explicit TimedModule(Waits waits, int64_t weight_numel = 1) : waits_(waits) {
    weight_ = register_parameter("weight", tp::zeros({weight_numel}));
  }
  tp::Tensor forward(const tp::Tensor& x) override {
    tallied_wait(0, waits_.forward);
    tp::Tensor out = x.detach().clone();
    return tp::autograd::attach(out, std::make_shared<TimedBackward>(waits_, weight_.shape()),
                                {x, weight_});
  }
  std::string type_name() const override { return "TimedModule"; }

 private:
  Waits waits_;
  tp::Tensor weight_;
};

/// `num_stages` timed stages of one row of `width` values each.
inline std::vector<std::shared_ptr<pp::PipelineStage>> make_stages(int num_stages, Waits waits,
                                                                   int64_t width = 4) {
  std::vector<std::shared_ptr<pp::PipelineStage>> stages;
  for (int s = 0; s < num_stages; ++s)
    stages.push_back(std::make_shared<pp::PipelineStage>(
        std::make_shared<TimedModule>(waits), s, num_stages, tp::cpu(),
        std::vector<pp::TensorMeta>{pp::TensorMeta{tp::Shape{1, width}}},
        std::vector<pp::TensorMeta>{pp::TensorMeta{tp::Shape{1, width}}}));
  return stages;
}

/// The simulator's costs for the same stages, in milliseconds. Stage 0's input is data: its I
/// computes no gradient (as PyTorch's), so it costs nothing there and its B is its W alone.
inline tensorplay::schedules::CostModel costs_of(int num_stages, Waits waits) {
  auto ms = [](std::chrono::microseconds d) { return d.count() / 1000.0; };
  tensorplay::schedules::CostModel costs;
  costs.forward.assign(num_stages, ms(waits.forward));
  costs.input_backward.assign(num_stages, ms(waits.input_backward));
  costs.weight_backward.assign(num_stages, ms(waits.weight_backward));
  costs.input_backward[0] = 0.0;
  return costs;
}

/// costs_of with each kind's wait as the tally measured it (the requested wait where none ran).
inline tensorplay::schedules::CostModel measured_costs_of(int num_stages, Waits waits) {
  tensorplay::schedules::CostModel costs = costs_of(num_stages, waits);
  const WaitTally& t = wait_tally();
  const double f = t.mean_ms(0, costs.forward[0]), i = t.mean_ms(1, costs.input_backward.back()),
               w = t.mean_ms(2, costs.weight_backward[0]);
  costs.forward.assign(num_stages, f);
  costs.input_backward.assign(num_stages, i);
  costs.weight_backward.assign(num_stages, w);
  costs.input_backward[0] = 0.0;
  return costs;
}

}  // namespace timed_stage
