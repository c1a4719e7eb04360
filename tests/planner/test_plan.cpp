// Tests for planner/plan.h: searches over hand-made profiles whose best configuration is worked
// out on paper (1F1B with p equal stages of F and B over m microbatches takes (m + p - 1)(F + B)).
#include <catch2/catch.hpp>

#include "planner/plan.h"
#include "synthetic_profile.h"

namespace pp = tensorplay::pipelining;
namespace sc = tensorplay::schedules;

namespace {

// The first refused configuration of `kind` with `microbatches`, or null.
const pp::PlanChoice* refused(const pp::PlanResult& r, sc::ScheduleKind kind, int microbatches) {
  for (const pp::PlanChoice& c : r.ranked)
    if (!c.feasible && c.schedule == kind && c.microbatches == microbatches) return &c;
  return nullptr;
}

}  // namespace

TEST_CASE("balanced_stage_begins minimises the slowest stage", "[planner][plan]") {
  CHECK(pp::balanced_stage_begins({1, 1, 1, 3}, 2) == std::vector<int>{0, 3});
  CHECK(pp::balanced_stage_begins({3, 1, 1, 1}, 2) == std::vector<int>{0, 1});
  CHECK(pp::balanced_stage_begins({1, 2, 3, 4, 5}, 3) == std::vector<int>{0, 3, 4});
  CHECK(pp::balanced_stage_begins({1, 1}, 2) == std::vector<int>{0, 1});
  CHECK_THROWS_WITH(pp::balanced_stage_begins({1, 1}, 3), Catch::Contains("2 segments into 3"));
}

TEST_CASE("the memory cap excludes GPipe's stash and leaves 1F1B the best", "[planner][plan]") {
  // 4 segments of F 1, B 2, 10 bytes of activations per sample each; 2 ranks, batch 4. 1F1B and
  // GPipe both take (4 + 1) x (2 + 4) = 30 at 4 microbatches, but GPipe holds 4 activations of
  // 20 bytes on rank 0 (80 at any microbatch count) and 1F1B 2 (40).
  const pp::Profile profile = planner_test::synthetic({1, 1, 1, 1}, 10, 2);
  pp::PlanRequest request{.world = 2, .memory_cap = 50, .batch = 4};
  request.schedules = {sc::ScheduleKind::GPipe, sc::ScheduleKind::OneFOneB};
  const pp::PlanResult result = pp::plan(profile, request);
  const pp::PlanChoice& best = result.best();
  CHECK(best.schedule == sc::ScheduleKind::OneFOneB);
  CHECK(best.microbatches == 4);
  CHECK(best.stage_begin == std::vector<int>{0, 2});
  CHECK(best.recompute == std::vector<bool>{false, false});
  CHECK(best.step_seconds == Approx(30));
  CHECK(best.peak_bytes == std::vector<double>{40, 20});
  CHECK(best.bubble == Approx(1.0 / 5));  // each rank idles one microbatch's F + B of five
  const pp::PlanChoice* gpipe = refused(result, sc::ScheduleKind::GPipe, 4);
  REQUIRE(gpipe != nullptr);
  CHECK_THAT(gpipe->why, Catch::Contains("over the memory cap: rank 0 needs"));
  CHECK(gpipe->peak_bytes[0] == 80);
  CHECK(result.configs > 10);
  // Without a cap GPipe ties at 30: nothing is refused for memory.
  request.memory_cap = 0;
  CHECK(pp::plan(profile, request).best().step_seconds == Approx(30));
}

TEST_CASE("a tight cap makes recomputation the best", "[planner][plan]") {
  // Cap 15: without recomputation rank 0 needs 40 and rank 1 20. Recomputing (2 bytes per
  // segment) needs 8 on rank 0 at 4 microbatches and costs the forward again in the backward:
  // (4 + 1) x (2 + 6) = 40. Fewer microbatches hold bigger activations: 16 > 15.
  const pp::Profile profile = planner_test::synthetic({1, 1, 1, 1}, 10, 2);
  pp::PlanRequest request{.world = 2, .memory_cap = 15, .batch = 4};
  request.schedules = {sc::ScheduleKind::GPipe, sc::ScheduleKind::OneFOneB};
  const pp::PlanChoice best = pp::plan(profile, request).best();
  CHECK(best.schedule == sc::ScheduleKind::OneFOneB);
  CHECK(best.microbatches == 4);
  CHECK(best.recompute == std::vector<bool>{true, true});
  CHECK(best.step_seconds == Approx(40));
  CHECK(best.peak_bytes == std::vector<double>{8, 4});
  request.try_recompute = false;
  CHECK_THROWS_WITH(pp::plan(profile, request).best(),
                    Catch::Contains("no configuration fits") && Catch::Contains("memory cap"));
}

TEST_CASE("cuts balance measured time, not segment counts", "[planner][plan]") {
  // A heavy first segment (an embedding, say): F 3, 1, 1, 1. Balanced: {3} | {1, 1, 1}, both
  // stages F 3, B 6: (8 + 1) x 9 = 81 at 8 microbatches. The even cut {3, 1} | {1, 1} is slower.
  const pp::Profile profile = planner_test::synthetic({3, 1, 1, 1});
  pp::PlanRequest request{.world = 2, .batch = 8};
  request.schedules = {sc::ScheduleKind::OneFOneB};
  const pp::PlanResult result = pp::plan(profile, request);
  CHECK(result.best().cut == "balanced");
  CHECK(result.best().stage_begin == std::vector<int>{0, 1});
  CHECK(result.best().microbatches == 8);
  CHECK(result.best().step_seconds == Approx(81));
  bool even_lost = false;
  for (const pp::PlanChoice& c : result.ranked)
    if (c.cut == "even" && c.microbatches == 8) {
      even_lost = c.step_seconds > 81 && c.why.find("step") != std::string::npos;
    }
  CHECK(even_lost);
}

TEST_CASE("a fixed overhead per action makes too many microbatches lose", "[planner][plan]") {
  // Each action keeps 0.5 s whatever the microbatch; the rest scales with it. Batch 8 on 2 ranks:
  // at 8 microbatches stages take F 2, B 4: 9 x 6 = 54; at 4, F 3, B 7: 5 x 10 = 50; at 2,
  // F 5, B 13: 3 x 18 = 54; at 1, 2 x 34 = 68.
  pp::Profile profile = planner_test::synthetic({1, 1, 1, 1});
  for (pp::SegmentProfile& s : profile.segments) s.overhead = 0.5;
  pp::PlanRequest request{.world = 2, .batch = 8};
  request.schedules = {sc::ScheduleKind::OneFOneB};
  const pp::PlanChoice best = pp::plan(profile, request).best();
  CHECK(best.microbatches == 4);
  CHECK(best.step_seconds == Approx(50));
}

TEST_CASE("threads per stage follow the profile's scaling and the host's cores",
          "[planner][plan]") {
  pp::Profile profile = planner_test::synthetic({1, 1, 1, 1});
  profile.threads = {{1, 1.0}, {2, 1.5}};
  pp::PlanRequest request{.world = 2, .batch = 4, .cores = 4};
  request.schedules = {sc::ScheduleKind::OneFOneB};
  const pp::PlanChoice best = pp::plan(profile, request).best();
  CHECK(best.threads == 2);  // 4 cores, 2 stage actors: 2 each
  CHECK(best.step_seconds == Approx(30 / 1.5));
  request.cores = 2;  // one core each: no second thread to give
  CHECK(pp::plan(profile, request).best().threads == 1);
  CHECK(pp::plan(profile, request).best().step_seconds == Approx(30));
}

TEST_CASE("configurations the sizes cannot hold are refused with the reason", "[planner][plan]") {
  const pp::Profile profile = planner_test::synthetic({1, 1, 1, 1});
  pp::PlanRequest request{.world = 2, .batch = 2};
  request.schedules = {sc::ScheduleKind::Interleaved1F1B, sc::ScheduleKind::DualPipeV};
  request.stages_per_rank = {2, 3};
  const pp::PlanResult result = pp::plan(profile, request);
  bool too_many_stages = false, sizes = false;
  for (const pp::PlanChoice& c : result.ranked) {
    too_many_stages |= c.why.find("6 stages need at least as many segments") != std::string::npos;
    sizes |= c.schedule == sc::ScheduleKind::DualPipeV &&
             c.why.find("cannot run these sizes") != std::string::npos;
  }
  CHECK(too_many_stages);
  CHECK(sizes);  // DualPipeV needs at least 2p = 4 microbatches; the batch holds 2
  CHECK_THROWS_WITH(pp::plan(profile, {.world = 0, .batch = 2}), Catch::Contains("world"));
  CHECK_THROWS_WITH(pp::plan(profile, {.world = 2, .batch = 0}), Catch::Contains("batch"));
  CHECK_THROWS_WITH(pp::plan(profile, {.world = 2, .batch = 2, .channel = "ucx_tcp"}),
                    Catch::Contains("no channel 'ucx_tcp'"));
}

TEST_CASE("predict evaluates one given configuration as the search does", "[planner][plan]") {
  const pp::Profile profile = planner_test::synthetic({1, 1, 1, 1});
  pp::PlanChoice c;
  c.schedule = sc::ScheduleKind::OneFOneB;
  c.ranks = 2;
  c.microbatches = 4;
  c.stage_begin = {0, 2};
  const pp::PlanChoice p = pp::predict(profile, {.world = 2, .batch = 4}, c);
  CHECK(p.step_seconds == Approx(30));
  // An optimizer step of 1 s per segment: one process steps all four after the pipeline (34);
  // separate processes step their own two at once (32).
  pp::Profile stepped = profile;
  for (pp::SegmentProfile& s : stepped.segments) s.optimizer_seconds = 1;
  CHECK(pp::predict(stepped, {.world = 2, .batch = 4}, c).step_seconds == Approx(34));
  CHECK(pp::predict(stepped, {.world = 2, .batch = 4, .one_process = false}, c).step_seconds ==
        Approx(32));
  c.stage_begin = {0, 5};
  CHECK_THROWS_WITH(pp::predict(profile, {.world = 2, .batch = 4}, c),
                    Catch::Contains("runs past the profile's 4"));
}
