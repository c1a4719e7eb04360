// Tests for tensorplay/pipelining/planner/plan_file.h: the plan's JSON round trip and its checks
// against a model.
#include <catch2/catch.hpp>
#include <cstdio>

#include "synthetic_profile.h"
#include "tensorplay/pipelining/planner/plan_file.h"

namespace pp = tensorplay::pipelining;
namespace sc = tensorplay::schedules;

namespace {

pp::Plan one_f_one_b_plan() {
  const pp::Profile profile = planner_test::synthetic({1, 1, 1, 1});
  pp::PlanRequest request{.world = 2, .batch = 4};
  request.schedules = {sc::ScheduleKind::OneFOneB};
  return pp::make_plan(profile, pp::plan(profile, request).best(), request.batch);
}

}  // namespace

TEST_CASE("a plan survives the JSON round trip and a file", "[planner][plan_file]") {
  const pp::Plan plan = one_f_one_b_plan();
  CHECK(plan.split == std::vector<std::string>{"blocks.2"});
  CHECK(plan.split_spec().count("blocks.2") == 1);
  CHECK(plan.recompute_policy(0).mode == tensorplay::pipelining::RecomputePolicy::Mode::None);
  CHECK(plan.order_csv.find("0F0") != std::string::npos);
  const pp::Plan back = pp::plan_from_json(pp::plan_to_json(plan));
  CHECK(pp::plan_to_json(back) == pp::plan_to_json(plan));
  CHECK(back.schedule == sc::ScheduleKind::OneFOneB);
  CHECK(back.predicted_step_seconds == Approx(30));
  const std::string path = "test_plan_round_trip.json";
  pp::save_plan(plan, path);
  CHECK(pp::plan_to_json(pp::load_plan(path)) == pp::plan_to_json(plan));
  std::remove(path.c_str());
}

TEST_CASE("a plan that does not match the model is an error naming the mismatch",
          "[planner][plan_file]") {
  const pp::Plan plan = one_f_one_b_plan();
  const std::vector<std::string> candidates = {"blocks.1", "blocks.2", "blocks.3"};
  CHECK_NOTHROW(pp::check_plan(plan, candidates, 2, 8));
  CHECK_THROWS_WITH(pp::check_plan(plan, {"layers.1", "layers.2"}, 2, 4),
                    Catch::Contains("cuts at blocks.2, which this model does not have") &&
                        Catch::Contains("layers.1, layers.2"));
  CHECK_THROWS_WITH(pp::check_plan(plan, candidates, 3, 4),
                    Catch::Contains("needs 2 ranks") && Catch::Contains("the world has 3"));
  CHECK_THROWS_WITH(pp::check_plan(plan, candidates, 2, 6),
                    Catch::Contains("microbatches do not divide the batch of 6"));
  std::string text = pp::plan_to_json(plan);
  text.replace(text.find("\"microbatches\""), 14, "\"micro\"");
  CHECK_THROWS_WITH(pp::plan_from_json(text), Catch::Contains("no field 'microbatches'"));
  CHECK_THROWS_WITH(pp::load_plan("no_such_plan.json"), Catch::Contains("no_such_plan.json"));
}
