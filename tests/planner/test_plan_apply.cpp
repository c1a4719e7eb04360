// Tests for tensorplay/pipelining/planner/plan_apply.h: schedule options and stage settings from a
// plan.
#include <catch2/catch.hpp>

#include "synthetic_profile.h"
#include "tensorplay/pipelining/planner/plan_apply.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace sc = tensorplay::schedules;

TEST_CASE("a plan sets the schedule's order and each stage's recomputation and threads",
          "[planner][plan_apply]") {
  const pp::Profile profile = planner_test::synthetic({1, 1, 1, 1}, 10, 2);
  pp::PlanRequest request{.world = 2, .memory_cap = 30, .batch = 4};
  request.schedules = {sc::ScheduleKind::OneFOneB};
  const pp::Plan plan = pp::make_plan(profile, pp::plan(profile, request).best(), 4);
  const pp::ScheduleOptions options = pp::schedule_options(plan);
  CHECK(options.stages_per_rank == 1);
  CHECK(options.order == sc::generate_order(sc::ScheduleKind::OneFOneB, 2, 1, 4));
  auto block = tp::nn::Sequential(tp::nn::Linear(4, 4), tp::nn::ReLU());
  // Cap 30: only the first stage must recompute (test_plan.cpp works the bytes out).
  auto stage = std::make_shared<pp::PipelineStage>(block.ptr(), 0, 2, tp::cpu(),
                                                   std::vector<tp::Tensor>{tp::zeros({1, 4})});
  pp::apply_plan(plan, {stage});
  CHECK(stage->recompute().mode == pp::RecomputePolicy::Mode::Full);
  CHECK(stage->num_threads() == plan.threads);
  auto lone = std::make_shared<pp::PipelineStage>(block.ptr(), 0, 3, tp::cpu(),
                                                  std::vector<tp::Tensor>{tp::zeros({1, 4})});
  CHECK_THROWS_WITH(pp::apply_plan(plan, {lone}),
                    Catch::Contains("has 2 stages") && Catch::Contains("pipeline of 3"));
}
