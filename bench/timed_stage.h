// Stages whose forward, input-gradient backward (I) and weight-gradient backward (W) are waits of
// an exact length (a custom op with its own autograd node), so a pipeline's measured makespan can
// be held against the simulator's for the same order and costs. Shared by the runtime benchmarks.
#pragma once

#include <sys/prctl.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "schedules/cost_model.h"
#include "stages/pipeline_stage.h"
#include "tensors/autograd/node.h"
#include "tensors/tensors.h"

namespace timed_stage {

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;

/// Waits `duration` exactly: sleeps until shortly before the end (with the thread's timer slack
/// at 1 us), then spins, yielding, to the end.
inline void wait_exactly(std::chrono::microseconds duration) {
  thread_local bool slack_set = false;
  if (!slack_set) {
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    slack_set = true;
  }
  using clock = std::chrono::steady_clock;
  const auto end = clock::now() + duration;
  const auto spin = std::chrono::microseconds(120);
  if (duration > spin) std::this_thread::sleep_until(end - spin);
  while (clock::now() < end) std::this_thread::yield();
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
      wait_exactly(waits_.input_backward);
      out[0] = grad;
    }
    if (needed[1]) {
      wait_exactly(waits_.weight_backward);
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
    wait_exactly(waits_.forward);
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

}  // namespace timed_stage
