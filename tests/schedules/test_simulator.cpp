#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "tensorplay/schedules/errors.h"
#include "tensorplay/schedules/policy.h"
#include "tensorplay/schedules/schedule_kind.h"
#include "tensorplay/schedules/simulator.h"

using namespace tensorplay::schedules;

namespace {

SimulationResult run(ScheduleKind kind, int p, int v, int m, const CostModel& costs) {
  return simulate_order(generate_order(kind, p, v, m), stage_to_rank(kind, p, v), m, costs);
}

// "Unit costs": F = 1 and B = 2 (I = W = 1) per stage pass.
const CostModel kUnit = CostModel::uniform(1, 1, 1);

}  // namespace

TEST_CASE("theory: GPipe and 1F1B, p=4 m=8: makespan 33, bubble 9/33", "[simulator]") {
  for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB}) {
    SimulationResult r = run(kind, 4, 1, 8, kUnit);
    CHECK(r.makespan == 33);
    CHECK(r.span == 33);
    CHECK(r.bubble_fraction == Approx(9.0 / 33));
    for (int rank = 0; rank < 4; ++rank) {
      CHECK(r.busy[rank] == 24);
      CHECK(r.idle[rank] == 9);
      CHECK(r.rank_bubble_fraction(rank) == Approx(9.0 / 33));
    }
  }
}

TEST_CASE("theory: GPipe/1F1B makespan (m+p-1)(F+B), peak m vs min(p-r, m)", "[simulator]") {
  for (int p = 1; p <= 6; ++p) {
    for (int m = p; m <= 3 * p; m += std::max(1, p / 2)) {
      INFO("p=" << p << " m=" << m);
      SimulationResult gpipe = run(ScheduleKind::GPipe, p, 1, m, kUnit);
      SimulationResult one_f_one_b = run(ScheduleKind::OneFOneB, p, 1, m, kUnit);
      CHECK(gpipe.makespan == 3.0 * (m + p - 1));
      CHECK(one_f_one_b.makespan == 3.0 * (m + p - 1));
      CHECK(gpipe.bubble_fraction == Approx(double(p - 1) / (m + p - 1)));
      for (int rank = 0; rank < p; ++rank) {
        CHECK(gpipe.peak_activations[rank] == m);
        CHECK(one_f_one_b.peak_activations[rank] == std::min(p - rank, m));
      }
    }
  }
}

TEST_CASE("theory: Megatron interleaving divides the bubble by V", "[simulator]") {
  // Each stage pass costs 1/V of a rank's share: bubble (p-1)(F+B)/V on top of m(F+B).
  for (int v : {2, 3, 4}) {
    CostModel costs = CostModel::uniform(1.0 / v, 1.0 / v, 1.0 / v);
    for (int p : {2, 3, 4}) {
      for (int m : {p, 2 * p, 3 * p}) {
        INFO("V=" << v << " p=" << p << " m=" << m);
        double expected = 3.0 * m + 3.0 * (p - 1) / v;
        CHECK(run(ScheduleKind::Interleaved1F1B, p, v, m, costs).makespan == Approx(expected));
        CHECK(run(ScheduleKind::LoopedBFS, p, v, m, costs).makespan == Approx(expected));
      }
    }
  }
}

TEST_CASE("theory: ZB-H1 (InterleavedZeroBubble, V=1) bubble is (p-1)(F+I-W)", "[simulator]") {
  CHECK(run(ScheduleKind::InterleavedZeroBubble, 4, 1, 8, kUnit).makespan == 27);
  for (int p = 2; p <= 6; ++p) {
    for (int m = p; m <= 3 * p; m += p) {
      INFO("p=" << p << " m=" << m);
      CHECK(run(ScheduleKind::InterleavedZeroBubble, p, 1, m, kUnit).makespan == 3.0 * m + (p - 1));
    }
  }
}

TEST_CASE("theory: ZB-V, p=4 m=8, stage pass 0.5: makespan 25.5, span 24, peak 8", "[simulator]") {
  SimulationResult r = run(ScheduleKind::ZBVZeroBubble, 4, 2, 8, CostModel::uniform(0.5, 0.5, 0.5));
  CHECK(r.makespan == 25.5);
  CHECK(r.span == 24);
  CHECK(r.peak_activations[0] == 8);
  // Zero bubble for m >= 2p: the busiest rank never idles between its first and last action;
  // the last rank starts (p-1) forwards late. Peak 2p stage activations (p microbatches).
  for (int p = 2; p <= 6; ++p) {
    for (int m = 2 * p; m <= 4 * p; m += p) {
      INFO("p=" << p << " m=" << m);
      SimulationResult z =
          run(ScheduleKind::ZBVZeroBubble, p, 2, m, CostModel::uniform(0.5, 0.5, 0.5));
      CHECK(z.span == 3.0 * m);
      CHECK(z.makespan == 3.0 * m + 0.5 * (p - 1));
      CHECK(z.peak_activations[0] == 2 * p);
    }
  }
}

TEST_CASE("theory: DualPipeV bubble (PP/2-1)(F&B+B-3W), peak 2p+1 stage activations",
          "[simulator]") {
  // PP = 2p stages; F = I = W = 1 per stage pass and no overlap gain, so F&B = F + B = 3:
  // bubble (p-1)(3 + 2 - 3) = 2(p-1) on top of each rank's 2m(F+B).
  for (int p = 2; p <= 5; ++p) {
    for (int m = 2 * p; m <= 4 * p; m += p) {
      INFO("p=" << p << " m=" << m);
      SimulationResult r = run(ScheduleKind::DualPipeV, p, 2, m, kUnit);
      CHECK(r.makespan == 6.0 * m + 2.0 * (p - 1));
      for (int peak : r.peak_activations) CHECK(peak == 2 * p + 1);
    }
  }
}

TEST_CASE("the overlap factor shortens OVERLAP_F_B", "[simulator]") {
  CostModel costs = kUnit;
  double plain = run(ScheduleKind::DualPipeV, 4, 2, 16, costs).makespan;
  costs.overlap_factor = 0.5;
  double overlapped = run(ScheduleKind::DualPipeV, 4, 2, 16, costs).makespan;
  CHECK(overlapped < plain);
  CHECK(CostModel(costs).duration(parse_action("(0F1;7B0)OVERLAP_F_B")) == 1.5);
}

TEST_CASE("latency and bandwidth delay every cross-rank hop", "[simulator]") {
  // GPipe: the forward and the backward chain each cross p-1 links.
  CostModel costs = kUnit;
  costs.latency = 0.25;
  costs.bandwidth = 100;
  costs.boundary_bytes = {25};  // 0.25 per transfer
  SimulationResult r = run(ScheduleKind::GPipe, 4, 1, 8, costs);
  CHECK(r.makespan == Approx(33 + 2 * 3 * 0.5));
  // Same-rank hand-overs in V placement are free: only cross-rank hops pay.
  SimulationResult v = run(ScheduleKind::ZBVZeroBubble, 1, 2, 4, costs);
  CHECK(v.makespan == Approx(4 * 3 * 2.0));
}

TEST_CASE("each stage keeps its own costs and each boundary its own transfer", "[simulator]") {
  // 1F1B, 2 ranks, 2 microbatches, F 1 and 3, B 2, latency 0.5: rank 1 runs F0 [1.5, 4.5],
  // B0 [4.5, 6.5], F1 [6.5, 9.5], B1 [9.5, 11.5]; rank 0 B0 [7, 9], B1 [12, 14].
  CostModel costs = kUnit;
  costs.forward = {1, 3};
  costs.latency = 0.5;
  SimulationResult r = run(ScheduleKind::OneFOneB, 2, 1, 2, costs);
  CHECK(r.makespan == 14);
  CHECK(r.busy == std::vector<double>{6, 10});
  // The same costs given per stage as when given once: the same step.
  costs.forward = {2, 2};
  CostModel once = kUnit;
  once.forward = {2};
  once.latency = 0.5;
  CHECK(run(ScheduleKind::OneFOneB, 2, 1, 2, costs).makespan ==
        run(ScheduleKind::OneFOneB, 2, 1, 2, once).makespan);
  // GPipe, 3 ranks, 1 microbatch, B = I = 1, transfers 1 then 3: F [0, 1], [2, 3], [6, 7], then B
  // [7, 8], [11, 12], [13, 14].
  CostModel hops = CostModel::uniform(1, 1, 0);
  hops.bandwidth = 1;
  hops.boundary_bytes = {1, 3};
  CHECK(run(ScheduleKind::GPipe, 3, 1, 1, hops).makespan == 14);
}

TEST_CASE("all ranks start at 0: makespan vs span", "[simulator]") {
  SimulationResult r = run(ScheduleKind::GPipe, 3, 1, 2, kUnit);
  CHECK(r.first_start == std::vector<double>{0, 1, 2});
  CHECK(r.last_end[0] == r.makespan);
  CHECK(r.span == r.makespan);
}

TEST_CASE("the timeline holds every action, one at a time per rank", "[simulator]") {
  SimulationResult r = run(ScheduleKind::DualPipeV, 3, 2, 6, kUnit);
  std::size_t total = 0;
  for (const RankOrder& rank : generate_order(ScheduleKind::DualPipeV, 3, 2, 6))
    total += rank.size();
  CHECK(r.timeline.size() == total);
  CHECK(r.actions == total);
  std::map<int, double> rank_end;
  std::map<int, double> rank_busy;
  for (const TimelineEvent& e : r.timeline) {
    CHECK(e.start >= rank_end[e.rank]);
    rank_end[e.rank] = e.end;
    rank_busy[e.rank] += e.end - e.start;
  }
  for (int rank = 0; rank < 3; ++rank) CHECK(rank_busy[rank] == Approx(r.busy[rank]));
  SimulationOptions options;
  options.record_timeline = false;
  CHECK(simulate_order(generate_order(ScheduleKind::GPipe, 2, 1, 2), {0, 1}, 2, kUnit, options)
            .timeline.empty());
}

TEST_CASE("the simulator runs the dynamic policy", "[simulator]") {
  const int p = 4, m = 8;
  std::vector<std::unique_ptr<SchedulePolicy>> owned;
  std::vector<SchedulePolicy*> policies;
  DynamicPolicyOptions options;
  options.max_stashed_activations = p;
  for (int rank = 0; rank < p; ++rank) {
    owned.push_back(make_dynamic_policy({rank}, p, m, options));
    policies.push_back(owned.back().get());
  }
  SimulationResult r = simulate(policies, {0, 1, 2, 3}, m, kUnit);
  CHECK(r.makespan == 33);  // as good as 1F1B
  for (int peak : r.peak_activations) CHECK(peak <= p);

  // V placement, split backward, tight cap: still finishes.
  owned.clear();
  policies.clear();
  options.split_backward = true;
  options.max_stashed_activations = 2;
  std::vector<int> placement = stage_to_rank(Placement::V, p, 2);
  for (int rank = 0; rank < p; ++rank) {
    owned.push_back(make_dynamic_policy({rank, 2 * p - 1 - rank}, 2 * p, m, options));
    policies.push_back(owned.back().get());
  }
  SimulationResult v = simulate(policies, placement, m, kUnit);
  for (int peak : v.peak_activations) CHECK(peak <= 2);
  CHECK(v.actions == static_cast<std::size_t>(p * 2 * m * 3));
}

TEST_CASE("a deadlocked run ends with what each rank waits for", "[simulator]") {
  PipelineOrder order = {parse_rank_order("0F0 0B0 0F1 0B1"), parse_rank_order("1F0 1F1 1B0 1B1")};
  CHECK_THROWS_AS(simulate_order(order, {0, 1}, 2, kUnit), ScheduleError);
  CHECK_THROWS_WITH(simulate_order(order, {0, 1}, 2, kUnit),
                    Catch::Contains("deadlocked") &&
                        Catch::Contains("rank 0: waiting for 0B0: gradient not arrived") &&
                        Catch::Contains("rank 1: waiting for 1F1: input not arrived"));
}

TEST_CASE("simulate checks its arguments", "[simulator]") {
  PipelineOrder order = generate_order(ScheduleKind::GPipe, 2, 1, 2);
  CHECK_THROWS_AS(simulate_order(order, {0, 2}, 2, kUnit), std::invalid_argument);
  CostModel bad = kUnit;
  bad.forward = {1, 2, 3};
  // The cost model's own check, made before any cost is read (not a lookup's complaint about
  // stage 3, which would mean the tables were built from the list first).
  CHECK_THROWS_WITH(simulate_order(order, {0, 1, 1, 0, 0}, 2, bad),
                    Catch::Contains("'forward' has 3 values; give one value or one per stage (5)"));
}

TEST_CASE("simulate checks its arguments before it asks a policy anything", "[simulator]") {
  // Forwards to a static-order policy and counts the calls it gets.
  class Counting : public SchedulePolicy {
   public:
    Counting(std::unique_ptr<SchedulePolicy> inner, int& calls)
        : inner_(std::move(inner)), calls_(calls) {}
    std::optional<Action> next(const ReadySet& ready) override {
      ++calls_;
      return inner_->next(ready);
    }
    void completed(const Action& action) override {
      ++calls_;
      inner_->completed(action);
    }
    bool finished() const override { return inner_->finished(); }
    void reset() override {
      ++calls_;
      inner_->reset();
    }
    std::string describe_wait(const ReadySet& ready) const override {
      return inner_->describe_wait(ready);
    }
    std::size_t total_actions() const override { return inner_->total_actions(); }

   private:
    std::unique_ptr<SchedulePolicy> inner_;
    int& calls_;
  };
  int calls = 0;
  std::vector<std::unique_ptr<SchedulePolicy>> owned;
  std::vector<SchedulePolicy*> policies;
  for (RankOrder& rank : generate_order(ScheduleKind::GPipe, 3, 1, 2)) {
    owned.push_back(std::make_unique<Counting>(make_static_order_policy(std::move(rank)), calls));
    policies.push_back(owned.back().get());
  }
  const std::vector<int> placement = {0, 1, 2};
  SimulationOptions options;
  options.record_timeline = true;
  CHECK(simulate(policies, placement, 2, kUnit, options).makespan == 12);
  REQUIRE(calls > 0);
  calls = 0;
  // A null policy after good ones: the good ones are not reset first.
  CHECK_THROWS_WITH(simulate({policies[0], policies[1], nullptr}, placement, 2, kUnit, options),
                    Catch::Contains("null policy"));
  CHECK(calls == 0);
  // A memory model with 2 values for 3 stages: refused before the step is simulated, not after.
  CostModel costs = kUnit;
  costs.memory.activation_bytes = {1, 2};
  CHECK_THROWS_WITH(simulate(policies, placement, 2, costs, options),
                    Catch::Contains("'activation_bytes' has 2 values"));
  CHECK(calls == 0);
}

TEST_CASE("the simulator is fast enough for big pipelines", "[simulator]") {
  // 128 ranks x 512 microbatches = 131072 actions; the 1024 x 8192 figure is bench_sim_scale's.
  SimulationOptions options;
  options.record_timeline = false;
  SimulationResult r =
      simulate_order(generate_order(ScheduleKind::OneFOneB, 128, 1, 512),
                     stage_to_rank(ScheduleKind::OneFOneB, 128, 1), 512, kUnit, options);
  CHECK(r.makespan == 3.0 * (512 + 127));
}

TEST_CASE("format_rank_figures prints a line per rank with the unit", "[simulator]") {
  SimulationResult r;
  r.busy = {3, 2};
  r.idle = {1, 2};
  r.peak_activations = {2, 1};
  CHECK(format_rank_figures(r, " us") ==
        "  rank 0: busy 3 us, idle 1 us, peak activations 2\n"
        "  rank 1: busy 2 us, idle 2 us, peak activations 1\n");
  r.busy.assign(70, 1);
  r.idle.assign(70, 0);
  r.peak_activations.assign(70, 1);
  CHECK_THAT(format_rank_figures(r), Catch::EndsWith("  ... 6 more ranks\n"));
  r.busy = {3};
  r.idle = {1};
  r.peak_activations = {2};
  r.peak_bytes = {4.0 * 1024 * 1024};
  CHECK(format_rank_figures(r) ==
        "  rank 0: busy 3, idle 1, peak activations 2, peak bytes 4.00 MiB\n");
}

TEST_CASE("format_bytes counts in powers of 1024", "[simulator]") {
  CHECK(format_bytes(410) == "410 B");
  CHECK(format_bytes(1536) == "1.50 KiB");
  CHECK(format_bytes(9.38 * 1024 * 1024) == "9.38 MiB");
  CHECK(format_bytes(1.2 * 1024 * 1024 * 1024) == "1.20 GiB");
}

TEST_CASE("theory: V-Half and V-Min run between ZBV's step time and 1F1B's", "[simulator]") {
  // The same job: 1F1B's stage is a rank's share (F = I = W = 1), a V stage half of it (0.5).
  const CostModel half = CostModel::uniform(0.5, 0.5, 0.5);
  for (int p : {2, 3, 4, 6, 8}) {
    for (int m : {p, 2 * p, 2 * p + 1, 3 * p}) {
      const double zbv = run(ScheduleKind::ZBVZeroBubble, p, 2, m, half).makespan;
      const double one_f_one_b = run(ScheduleKind::OneFOneB, p, 1, m, kUnit).makespan;
      const double vhalf = run(ScheduleKind::VHalf, p, 2, m, half).makespan;
      const double vmin = run(ScheduleKind::VMin, p, 2, m, half).makespan;
      INFO("p=" << p << " m=" << m << ": ZBV " << zbv << ", V-Half " << vhalf << ", V-Min " << vmin
                << ", 1F1B " << one_f_one_b);
      CHECK(zbv <= vhalf);
      CHECK(vhalf <= vmin);
      CHECK(vmin <= one_f_one_b);
      // Each rank does 6 half-size actions per microbatch: 3m of work, and a warm-up of at most
      // the block's 4p + 2 slots of half a unit, rounded to the period.
      CHECK(vmin <= 3.0 * m + 0.5 * (4 * p + 8));
    }
  }
}

TEST_CASE("theory: V-Half and V-Min stash what the paper's stable patterns stash", "[simulator]") {
  // Stage activations held from F to W's end, the most on any rank, in the steady state: the
  // figures of the zero-bubble project's V-Half and V-Min stable patterns (its memory count,
  // F +1 and W -1): 1F1B's first rank holds 2p, V-Half about p + 2, V-Min about 2p/3 + 2.
  const CostModel half = CostModel::uniform(0.5, 0.5, 0.5);
  const std::map<int, std::pair<int, int>> expected = {
      {4, {6, 4}}, {6, {8, 6}}, {8, {10, 8}}, {12, {14, 10}}, {16, {18, 12}}};
  for (const auto& [p, peaks] : expected) {
    INFO("p=" << p);
    auto worst = [](const SimulationResult& r) {
      return *std::max_element(r.peak_activations.begin(), r.peak_activations.end());
    };
    CHECK(worst(run(ScheduleKind::VHalf, p, 2, 3 * p, half)) == peaks.first);
    CHECK(worst(run(ScheduleKind::VMin, p, 2, 3 * p, half)) == peaks.second);
  }
}

TEST_CASE("a rank waiting for a recomputing backward's gradient rebuilds ahead", "[simulator]") {
  // 1F1B on 2 ranks, 1 microbatch: F = 1, B = 3 of which 1 is the recomputation. Rank 0 waits
  // from t = 1 to t = 5 for 0B0's gradient, so it rebuilds in [1, 2] and 0B0 takes 2, not 3.
  // Rank 1's backward is ready at once (its own loss): it never waits, never rebuilds ahead.
  const PipelineOrder order = {parse_rank_order("0F0 0B0"), parse_rank_order("1F0 1B0")};
  CostModel costs = CostModel::uniform(1, 3, 0);
  CHECK(simulate_order(order, {0, 1}, 1, costs).makespan == 8.0);
  costs.recompute_ahead = {1};
  const SimulationResult r = simulate_order(order, {0, 1}, 1, costs);
  CHECK(r.makespan == 7.0);
  CHECK(r.busy[0] == 1.0 + 1.0 + 2.0);  // the rebuilding counts as busy
  CHECK(r.busy[1] == 4.0);
  CHECK(r.actions == 4);  // the rebuilding is no action of the order
  // Part of I, so never longer than it.
  costs.recompute_ahead = {4};
  CHECK_THROWS_WITH(simulate_order(order, {0, 1}, 1, costs),
                    Catch::Contains("recompute_ahead is longer than its input_backward"));
}

TEST_CASE("a recomputing stage's F right before its own backward keeps the activations",
          "[simulator][recompute]") {
  // F = 1, B = 3 of which 1 recomputes. Rank 1 runs each F right before its backward (its own
  // loss): it keeps the activations and each B takes 2. Rank 0 runs both Fs first: it rebuilds.
  const PipelineOrder order = {parse_rank_order("0F0 0F1 0B0 0B1"),
                               parse_rank_order("1F0 1B0 1F1 1B1")};
  CostModel costs = CostModel::uniform(1, 3, 0);
  CHECK(simulate_order(order, {0, 1}, 2, costs).makespan == 12.0);  // 0B0 at 5, 0B1 at 9
  costs.recompute = {1};
  SimulationResult r = simulate_order(order, {0, 1}, 2, costs);
  CHECK(r.busy[1] == 1.0 + 2.0 + 1.0 + 2.0);
  CHECK(r.busy[0] == 1.0 + 1.0 + 3.0 + 3.0);
  CHECK(r.makespan == 10.0);  // 0B0 in [4, 7], 0B1 in [7, 10]
  // Rebuilding ahead while it waits (0B0's gradient from t = 2 to 4, 0B1's from 6 to 7).
  costs.recompute_ahead = {1};
  r = simulate_order(order, {0, 1}, 2, costs);
  CHECK(r.busy[0] == 1.0 + 1.0 + (1.0 + 2.0) * 2);
  CHECK(r.makespan == 9.0);
  // Part of I, so never longer than it.
  costs.recompute = {4};
  CHECK_THROWS_WITH(simulate_order(order, {0, 1}, 2, costs),
                    Catch::Contains("recompute is longer than its input_backward"));
}

namespace {

// A static-order policy the simulator cannot see through: it takes the event loop, the reference
// the sweep over static orders is held to.
class EventLoopOnly final : public SchedulePolicy {
 public:
  explicit EventLoopOnly(std::unique_ptr<SchedulePolicy> inner) : inner_(std::move(inner)) {}
  std::optional<Action> next(const ReadySet& ready) override { return inner_->next(ready); }
  void completed(const Action& action) override { inner_->completed(action); }
  bool finished() const override { return inner_->finished(); }
  void reset() override { inner_->reset(); }
  std::string describe_wait(const ReadySet& ready) const override {
    return inner_->describe_wait(ready);
  }
  std::size_t total_actions() const override { return inner_->total_actions(); }
  bool is_static_order() const override { return true; }
  std::optional<Action> next_in_order() const override { return inner_->next_in_order(); }

 private:
  std::unique_ptr<SchedulePolicy> inner_;
};

SimulationResult event_loop(const PipelineOrder& order, const std::vector<int>& placement, int m,
                            const CostModel& costs) {
  std::vector<std::unique_ptr<SchedulePolicy>> owned;
  std::vector<SchedulePolicy*> policies;
  for (const RankOrder& row : order) {
    owned.push_back(std::make_unique<EventLoopOnly>(make_static_order_policy(row)));
    policies.push_back(owned.back().get());
  }
  return simulate(policies, placement, m, costs);
}

void check_same(const SimulationResult& got, const SimulationResult& want) {
  CHECK(got.makespan == want.makespan);
  CHECK(got.span == want.span);
  CHECK(got.busy == want.busy);
  CHECK(got.idle == want.idle);
  CHECK(got.first_start == want.first_start);
  CHECK(got.last_end == want.last_end);
  CHECK(got.peak_activations == want.peak_activations);
  CHECK(got.bubble_fraction == want.bubble_fraction);
  CHECK(got.actions == want.actions);
  CHECK(got.peak_activation_bytes == want.peak_activation_bytes);
  REQUIRE(got.timeline.size() == want.timeline.size());
  for (std::size_t i = 0; i < got.timeline.size(); ++i) {
    CAPTURE(i);
    CHECK(got.timeline[i].rank == want.timeline[i].rank);
    CHECK(got.timeline[i].action == want.timeline[i].action);
    CHECK(got.timeline[i].start == want.timeline[i].start);
    CHECK(got.timeline[i].end == want.timeline[i].end);
  }
}

}  // namespace

TEST_CASE("static orders take a sweep whose figures and timeline are the event loop's, to the bit",
          "[simulator]") {
  // Every schedule (OVERLAP_F_B in DualPipeV), stages that cost differently, transfers that take
  // time and transfers that take none (ties at one instant), and odd durations whose sums round.
  std::vector<CostModel> models = {kUnit};
  CostModel varied;
  varied.forward = {1.1, 0.7, 1.3, 0.9, 1.0, 1.7, 0.3, 1.2};
  varied.input_backward = {1.9, 1.3, 2.1, 1.7, 2.0, 0.9, 1.1, 1.4};
  varied.weight_backward = {0.6, 0.8, 0.5, 1.1, 0.7, 0.4, 0.9, 0.2};
  varied.latency = 0.13;
  varied.bandwidth = 3.0;
  varied.boundary_bytes = {1.0, 2.0, 0.5, 1.5, 1.0, 2.5, 0.7};
  varied.overlap_factor = 0.8;
  models.push_back(varied);
  CostModel slow_links = CostModel::uniform(0.1, 0.3, 0.2);
  slow_links.latency = 2.5;
  models.push_back(slow_links);
  for (ScheduleKind kind :
       {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved1F1B,
        ScheduleKind::LoopedBFS, ScheduleKind::InterleavedZeroBubble, ScheduleKind::ZBVZeroBubble,
        ScheduleKind::DualPipeV, ScheduleKind::VHalf, ScheduleKind::VMin}) {
    const int v = default_stages_per_rank(kind);
    for (int p : {2, 4}) {
      for (int m : {2 * p, 3 * p}) {
        for (std::size_t c = 0; c < models.size(); ++c) {
          CAPTURE(std::string(schedule_name(kind)), p, m, c);
          const PipelineOrder order = generate_order(kind, p, v, m);
          const std::vector<int> placement = stage_to_rank(kind, p, v);
          CostModel costs = models[c];
          if (costs.forward.size() > 1) {  // one value per stage
            const std::size_t stages = placement.size();
            costs.forward.resize(stages, 1.0);
            costs.input_backward.resize(stages, 1.0);
            costs.weight_backward.resize(stages, 1.0);
            costs.boundary_bytes.resize(stages - 1, 1.0);
          }
          check_same(simulate_order(order, placement, m, costs),
                     event_loop(order, placement, m, costs));
        }
      }
    }
  }
}

TEST_CASE("orders the sweep cannot finish still end with what each rank waits for", "[simulator]") {
  // The sweep stops; the event loop runs and names the wait (as above), also for an action outside
  // the pipeline.
  PipelineOrder order = {parse_rank_order("0F0 0F1 0B1 0B0"), parse_rank_order("1F0 1B0 1F1 1B1")};
  SimulationResult fine = simulate_order(order, {0, 1}, 2, kUnit);
  CHECK(fine.actions == 8);
  // Five actions run before both ranks wait for ever.
  PipelineOrder stuck = {parse_rank_order("0F0 0F1 0B0 0B1"), parse_rank_order("1F0 1B0 1B1 1F1")};
  CHECK_THROWS_WITH(simulate_order(stuck, {0, 1}, 2, kUnit),
                    Catch::Contains("deadlocked") &&
                        Catch::Contains("rank 0: waiting for 0B1: gradient not arrived") &&
                        Catch::Contains("rank 1: waiting for 1B1: its forward 1F1 has not"));
  PipelineOrder outside = {parse_rank_order("0F0 0F5"), parse_rank_order("1F0")};
  CHECK_THROWS_AS(simulate_order(outside, {0, 1}, 2, kUnit), std::invalid_argument);
}
