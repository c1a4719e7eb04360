// Tests for tensorplay/pipelining/planner/plan.h: searches over hand-made profiles whose best
// configuration is worked out on paper (1F1B with p equal stages of F and B over m microbatches
// takes (m + p - 1)(F + B)).
#include <catch2/catch.hpp>

#include "synthetic_profile.h"
#include "tensorplay/pipelining/planner/detail/plan_costs.h"
#include "tensorplay/pipelining/planner/plan.h"
#include "tensorplay/schedules/generators.h"
#include "tensorplay/schedules/memory_model.h"
#include "tensorplay/schedules/simulator.h"

namespace pp = tensorplay::pipelining;
namespace sc = tensorplay::schedules;

namespace {

// The first refused configuration of `kind` with `microbatches`, or null.
const pp::PlanChoice* refused(const pp::PlanResult& r, sc::ScheduleKind kind, int n_microbatches) {
  for (const pp::PlanChoice& c : r.ranked)
    if (!c.feasible && c.schedule == kind && c.n_microbatches == n_microbatches) return &c;
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
  CHECK(best.n_microbatches == 4);
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
  // Cap 30: without recomputation rank 0 needs 40 and rank 1 20. Recomputing (2 bytes per
  // segment) keeps 4 per microbatch at 4 microbatches, and while a backward runs the stage holds
  // that microbatch's rebuilt 20: rank 0 needs 8 + 20 = 28. Recomputing only there (rank 1 fits)
  // costs rank 0 the forward again in its backward: F 2, B 6, 4 x 8 = 32 busy plus the 4 it
  // waits for rank 1's first F and B: 36 (recomputing both ranks: (4 + 1) x 8 = 40). While it
  // waits, rank 0 rebuilds its last segment (F 1) ahead, so its first B takes 5: 35. Its later
  // backwards find their gradients there and wait for nothing. Fewer microbatches hold bigger
  // activations (2 microbatches: 16 + 40 = 56 > 30).
  const pp::Profile profile = planner_test::synthetic({1, 1, 1, 1}, 10, 2);
  pp::PlanRequest request{.world = 2, .memory_cap = 30, .batch = 4};
  request.schedules = {sc::ScheduleKind::GPipe, sc::ScheduleKind::OneFOneB};
  const pp::PlanChoice best = pp::plan(profile, request).best();
  CHECK(best.schedule == sc::ScheduleKind::OneFOneB);
  CHECK(best.n_microbatches == 4);
  CHECK(best.recompute == std::vector<bool>{true, false});
  CHECK(best.step_seconds == Approx(35));
  CHECK(best.peak_bytes == std::vector<double>{28, 20});
  request.try_recompute = false;
  CHECK_THROWS_WITH(pp::plan(profile, request).best(),
                    Catch::Contains("no configuration fits") && Catch::Contains("memory cap"));
  // Below the rebuilt activations of one backward, recomputation does not fit either.
  request.try_recompute = true;
  request.memory_cap = 23;
  CHECK_THROWS_WITH(pp::plan(profile, request).best(), Catch::Contains("no configuration fits"));
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
  CHECK(result.best().n_microbatches == 8);
  CHECK(result.best().step_seconds == Approx(81));
  bool even_lost = false;
  for (const pp::PlanChoice& c : result.ranked)
    if (c.cut == "even" && c.n_microbatches == 8) {
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
  CHECK(best.n_microbatches == 4);
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
  c.n_microbatches = 4;
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

TEST_CASE("times at other microbatch sizes follow the larger sizes measured", "[planner][plan]") {
  // Two segments of F = 1, B = 2 at one sample; at 4 samples F = 8, B = 16 (twice the
  // proportional 4 and 8). 1F1B on 2 ranks of a segment each over 4 microbatches: 5 (F + B).
  pp::Profile profile = planner_test::synthetic({1, 1});
  pp::PlanChoice c;
  c.schedule = sc::ScheduleKind::OneFOneB;
  c.ranks = 2;
  c.n_microbatches = 4;
  c.stage_begin = {0, 1};
  auto step = [&](int64_t samples) {
    return pp::predict(profile, {.world = 2, .batch = 4 * samples}, c).step_seconds;
  };
  CHECK(step(2) == Approx(5 * 2 * 3));  // no larger sizes: in proportion to the samples
  for (pp::SegmentProfile& s : profile.segments) s.larger = {{4, 8, 8, 8, 16}};
  CHECK(step(1) == Approx(5 * 3));
  CHECK(step(2) == Approx(5 * (1 + 7.0 / 3) * 3));  // a third of the way from 1 to 4 samples
  CHECK(step(4) == Approx(5 * 24));
  CHECK(step(8) == Approx(5 * (8 + 4 * 7.0 / 3) * 3));  // past 4: along the last piece
  profile.segments[0].overhead = profile.segments[1].overhead = 0.5;  // F's fixed part at 0
  CHECK(pp::predict(profile, {.world = 2, .batch = 2}, c).step_seconds < step(1));
}

TEST_CASE("the compute factor scales compute when a host runs several ranks", "[planner][plan]") {
  pp::Profile profile = planner_test::synthetic({1, 1, 1, 1});
  profile.compute_factor = 1.5;
  pp::PlanChoice c;
  c.schedule = sc::ScheduleKind::OneFOneB;
  c.ranks = 2;
  c.n_microbatches = 4;
  c.stage_begin = {0, 2};
  // (m + p - 1)(F + B) = 5 x 6 = 30 at factor 1; both ranks on one host: 1.5 times that.
  CHECK(pp::predict(profile, {.world = 2, .batch = 4}, c).step_seconds == Approx(45));
  // A rank per host: nothing shares its host, compute as profiled.
  CHECK(pp::predict(profile, {.world = 2, .batch = 4, .ranks_per_host = 1}, c).step_seconds ==
        Approx(30));
  // The time per action is the runtime's, not compute: it is not scaled (10 actions per rank).
  profile.action_overhead = 0.5;
  CHECK(pp::predict(profile, {.world = 2, .batch = 4}, c).step_seconds == Approx(45 + 5 * 2 * 0.5));
  // A factor calibrated at 4 samples per microbatch: the step there (compute 4 times the
  // profiled one's) is scaled by it, not by the profile microbatch's factor.
  profile.action_overhead = 0;
  profile.larger_compute_factors = {{4, 1.25}};
  CHECK(pp::predict(profile, {.world = 2, .batch = 16}, c).step_seconds == Approx(30 * 4 * 1.25));
  CHECK(pp::predict(profile, {.world = 2, .batch = 4}, c).step_seconds == Approx(45));
}

TEST_CASE("the first stage's W does its whole backward under a split backward", "[planner][plan]") {
  // Its inputs are data: its I finds no input gradient to compute (the runtime's backward_input
  // has no targets there), so what the profile times as its I runs in its W.
  const pp::Profile profile = planner_test::synthetic({1, 1, 1, 1});  // I = W = F, B = 2F
  pp::PlanChoice c;
  c.schedule = sc::ScheduleKind::ZBVZeroBubble;
  c.ranks = 2;
  c.stages_per_rank = 2;
  c.n_microbatches = 4;
  c.stage_begin = {0, 1, 2, 3};
  c.recompute.assign(4, false);
  const pp::detail::PlanContext context =
      pp::detail::make_context(profile, {.world = 2, .batch = 4});
  sc::CostModel m = pp::detail::cost_model(profile, context, c);
  CHECK(m.input_backward[0] == 0);
  CHECK(m.weight_backward[0] == 2);
  CHECK(m.input_backward[1] == 1);
  CHECK(m.weight_backward[1] == 1);
  c.recompute[0] = true;  // recomputing, its I computes everything (F again, I and W)
  m = pp::detail::cost_model(profile, context, c);
  CHECK(m.input_backward[0] == 3);
  CHECK(m.weight_backward[0] == 0);
  c.schedule = sc::ScheduleKind::OneFOneB;  // a fused B: nothing moves
  c.stages_per_rank = 1;
  c.stage_begin = {0, 2};
  c.recompute = {false, false};
  m = pp::detail::cost_model(profile, context, c);
  CHECK(m.input_backward[0] == 4);
  CHECK(m.weight_backward[0] == 0);
}

namespace {

// What the simulator's memory model predicts for `c` on `profile` (batch `batch`), with the
// memory costs written out here from the profile's figures rather than taken from the planner.
std::vector<double> simulator_peak_bytes(const pp::Profile& profile, const pp::PlanChoice& c,
                                         int64_t batch) {
  const double samples = static_cast<double>(batch) / c.n_microbatches;
  const int segments = static_cast<int>(profile.segments.size());
  sc::MemoryCosts m;
  m.activation_bytes.assign(c.num_stages(), 0.0);
  m.recompute_activation_bytes.assign(c.num_stages(), 0.0);
  m.fixed_bytes.assign(c.num_stages(), 0.0);
  m.recompute.assign(c.num_stages(), 0);
  for (int s = 0; s < c.num_stages(); ++s) {
    const int end = s + 1 < c.num_stages() ? c.stage_begin[s + 1] : segments;
    for (int i = c.stage_begin[s]; i < end; ++i) {
      const pp::SegmentProfile& seg = profile.segments[i];
      m.activation_bytes[s] += seg.activation_bytes * samples;
      m.recompute_activation_bytes[s] += seg.activation_bytes_recompute * samples;
      m.fixed_bytes[s] += seg.parameter_bytes + seg.gradient_bytes + seg.optimizer_bytes;
    }
    m.recompute[s] = c.recompute[s] ? 1 : 0;
  }
  m.weight_stash_bytes = m.kept_per_stage(c.num_stages());
  const std::vector<int> placement = sc::stage_to_rank(c.schedule, c.ranks, c.stages_per_rank);
  const sc::SimulationResult r =
      sc::simulate_order(sc::generate_order(c.schedule, c.ranks, c.stages_per_rank, c.n_microbatches),
                         placement, c.n_microbatches, sc::CostModel::uniform(1, 1, 1));
  return sc::predict_memory(r, placement, m).peak_bytes;
}

pp::PlanChoice choice(sc::ScheduleKind kind, int stages_per_rank, std::vector<int> begins,
                      std::vector<bool> recompute) {
  pp::PlanChoice c;
  c.schedule = kind;
  c.ranks = 2;
  c.stages_per_rank = stages_per_rank;
  c.n_microbatches = 4;
  c.stage_begin = std::move(begins);
  c.recompute = std::move(recompute);
  return c;
}

}  // namespace

TEST_CASE("the planner's peak bytes are the simulator's memory model's", "[planner][plan]") {
  // Uneven segments (a heavy first one), parameters and optimizer state, batch 8 in 4
  // microbatches of 2 samples.
  pp::Profile profile = planner_test::synthetic({2, 1, 1, 1, 1, 1, 1, 1}, 10, 3);
  profile.segments[0].activation_bytes = 40;
  for (size_t i = 0; i < profile.segments.size(); ++i) {
    profile.segments[i].parameter_bytes = 100.0 * (i + 1);
    profile.segments[i].gradient_bytes = 100.0 * (i + 1);
    profile.segments[i].optimizer_bytes = 200.0 * (i + 1);
  }
  const pp::PlanRequest request{.world = 2, .batch = 8};
  const std::vector<pp::PlanChoice> choices = {
      choice(sc::ScheduleKind::OneFOneB, 1, {0, 3}, {false, false}),
      choice(sc::ScheduleKind::GPipe, 1, {0, 4}, {true, false}),
      choice(sc::ScheduleKind::Interleaved1F1B, 2, {0, 2, 4, 6}, {false, true, false, false}),
      choice(sc::ScheduleKind::ZBVZeroBubble, 2, {0, 1, 4, 6}, {true, false, false, true}),
      choice(sc::ScheduleKind::DualPipeV, 2, {0, 2, 5, 7}, {false, false, false, false}),
  };
  for (const pp::PlanChoice& c : choices) {
    INFO(c.describe());
    const std::vector<double> expected = simulator_peak_bytes(profile, c, request.batch);
    const pp::PlanChoice predicted = pp::predict(profile, request, c);
    REQUIRE(predicted.peak_bytes.size() == 2);
    CHECK(predicted.peak_bytes == expected);
    CHECK(predicted.peak_bytes[0] > 0);
  }
}

TEST_CASE("a cap between two candidates' peaks excludes the larger", "[planner][plan]") {
  const pp::Profile profile = planner_test::synthetic({1, 1, 1, 1}, 10, 2);
  pp::PlanRequest request{.world = 2, .batch = 8};
  request.schedules = {sc::ScheduleKind::OneFOneB, sc::ScheduleKind::GPipe};
  const pp::PlanChoice one_f_one_b =
      pp::predict(profile, request, choice(sc::ScheduleKind::OneFOneB, 1, {0, 2}, {false, false}));
  const pp::PlanChoice gpipe =
      pp::predict(profile, request, choice(sc::ScheduleKind::GPipe, 1, {0, 2}, {false, false}));
  // At 4 microbatches of 2 samples, 1F1B's rank 0 holds two microbatches of two segments
  // (2 x 40 = 80) and GPipe's all four (160); both take the same time.
  CHECK(one_f_one_b.max_peak_bytes() == 80);
  CHECK(gpipe.max_peak_bytes() == 160);
  CHECK(gpipe.step_seconds == Approx(one_f_one_b.step_seconds));
  request.memory_cap = (one_f_one_b.max_peak_bytes() + gpipe.max_peak_bytes()) / 2;
  request.try_recompute = false;
  const pp::PlanResult result = pp::plan(profile, request);
  bool saw_gpipe = false, saw_one_f_one_b = false;
  for (const pp::PlanChoice& c : result.ranked) {
    if (c.n_microbatches != 4 || c.stage_begin.empty()) continue;
    if (c.schedule == sc::ScheduleKind::GPipe) {
      saw_gpipe = true;
      CHECK_FALSE(c.feasible);
      CHECK_THAT(c.why, Catch::Contains("over the memory cap"));
    } else if (c.peak_bytes == one_f_one_b.peak_bytes) {
      saw_one_f_one_b = true;
      CHECK(c.feasible);
    }
  }
  CHECK(saw_gpipe);
  CHECK(saw_one_f_one_b);
}

TEST_CASE("a multi-process plan times transfers with the ucx channel, one process with its own",
          "[planner][plan]") {
  // 1F1B on 2 ranks of one segment each (F 1, B 2 per sample), batch 4. A hop costs T. By hand:
  // at 4 microbatches (F 1, B 2) the step is 15 + 4T, at 2 (F 2, B 4) it is 18 + 2T. Free
  // in-process hand-overs: 4 microbatches win (15); ucx_shm's T = 2: 2 microbatches (22 < 23);
  // ucx_tcp's T = 4 between hosts: 2 microbatches (26 < 31).
  pp::Profile profile = planner_test::synthetic({1, 1});
  profile.channels.push_back({"ucx_shm", 2.0, 0.0});
  profile.channels.push_back({"ucx_tcp", 4.0, 0.0});
  pp::PlanRequest request{.world = 2, .batch = 4};
  request.schedules = {sc::ScheduleKind::OneFOneB};
  const pp::PlanResult one_process = pp::plan(profile, request);
  CHECK(one_process.channel == "in_process");
  CHECK(one_process.best().n_microbatches == 4);
  CHECK(one_process.best().step_seconds == Approx(15));
  request.one_process = false;
  const pp::PlanResult processes = pp::plan(profile, request);
  CHECK(processes.channel == "ucx_shm");
  CHECK(processes.best().n_microbatches == 2);
  CHECK(processes.best().step_seconds == Approx(22));
  pp::PlanChoice four = processes.best();
  four.n_microbatches = 4;
  CHECK(pp::predict(profile, request, four).step_seconds == Approx(23));
  request.ranks_per_host = 1;  // a rank per host: TCP between them
  const pp::PlanResult hosts = pp::plan(profile, request);
  CHECK(hosts.channel == "ucx_tcp");
  CHECK(hosts.best().n_microbatches == 2);
  CHECK(hosts.best().step_seconds == Approx(26));
  CHECK(pp::predict(profile, request, four).step_seconds == Approx(31));
  request.channel = "in_process";  // named: it wins over the default
  CHECK(pp::plan(profile, request).best().step_seconds == Approx(15));
}

TEST_CASE("plan_channel falls back to what the profile has", "[planner][plan]") {
  pp::Profile profile = planner_test::synthetic({1, 1});  // in_process only, as before UCX
  pp::PlanRequest request{.world = 2, .batch = 4, .one_process = false};
  CHECK(pp::plan_channel(profile, request).kind == "in_process");
  profile.channels.push_back({"ucx_tcp", 4.0, 1e9});
  CHECK(pp::plan_channel(profile, request).kind == "ucx_tcp");  // no shared memory measured
  request.one_process = true;
  CHECK(pp::plan_channel(profile, request).kind == "in_process");
  request.channel = "ucx_shm";
  CHECK_THROWS_WITH(pp::plan_channel(profile, request),
                    Catch::Contains("no channel 'ucx_shm'") && Catch::Contains("ucx_tcp"));
  profile.channels.clear();
  request.channel.clear();
  CHECK(pp::plan_channel(profile, request).latency == 0);
}
