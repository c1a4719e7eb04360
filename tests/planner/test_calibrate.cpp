// Tests for planner/calibrate.h: one real run of a small GPT sets the per-action overhead so the
// simulator's step matches the measured one.
#include <catch2/catch.hpp>

#include "planner/calibrate.h"
#include "planner/plan.h"
#include "planner/profile_run.h"
#include "tensors/nn/gpt.h"
#include "tensors/tensors.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;

TEST_CASE("calibration makes the simulator's step match a real run", "[planner][calibrate]") {
  tp::manual_seed(0);
  const int64_t vocab = 11;
  tp::nn::GPT model(tp::nn::GPTConfig{
      .vocab_size = vocab, .context_length = 8, .n_layer = 2, .n_head = 2, .width = 16});
  auto loss = [vocab](const tp::Tensor& logits, const tp::Tensor& targets) {
    return tp::cross_entropy(logits.reshape({-1, vocab}), targets.reshape({-1}));
  };
  pp::ProfileOptions o;
  o.candidates = {"blocks.0", "blocks.1"};
  o.repeats = 1;
  o.loss_fn = loss;
  o.target = tp::zeros({2, 8});
  const std::vector<tp::Tensor> example = {tp::zeros({2, 8})};
  pp::Profile profile = pp::profile(*model.ptr(), example, o);
  const std::vector<float> before = model->parameters().front().to_vector();
  const double measured =
      pp::calibrate_profile(profile, *model.ptr(), example, {.loss_fn = loss, .target = o.target});
  CHECK(measured > 0);
  CHECK(profile.action_overhead >= 0);
  CHECK(model->parameters().front().to_vector() == before);  // nothing trained
  pp::PlanChoice c;
  c.schedule = tensorplay::schedules::ScheduleKind::OneFOneB;
  c.ranks = 2;
  c.microbatches = 4;
  std::vector<double> costs;
  for (const auto& s : profile.segments) costs.push_back(s.forward + s.full_backward);
  c.stage_begin = pp::balanced_stage_begins(costs, 2);
  const pp::PlanChoice p = pp::predict(profile, {.world = 2, .batch = 8}, c);
  const double predicted = p.step_seconds - p.optimizer_seconds;  // the run had no optimizer
  CHECK(p.optimizer_seconds > 0);
  if (profile.action_overhead > 0) CHECK(predicted == Approx(measured).epsilon(0.01));
  pp::Profile one = profile;
  one.segments.resize(1);
  CHECK_THROWS_WITH(
      pp::calibrate_profile(one, *model.ptr(), example, {.loss_fn = loss, .target = o.target}),
      Catch::Contains("at least 2 segments"));
}
