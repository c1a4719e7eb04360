// The planner's search (plan.h): configurations, their cost models, the simulator, the ranking.
#include "tensorplay/pipelining/planner/plan.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <stdexcept>

#include "tensorplay/core/cpu_threads.h"
#include "tensorplay/pipelining/planner/detail/plan_costs.h"
#include "tensorplay/schedules/generators.h"
#include "tensorplay/schedules/policy.h"
#include "tensorplay/schedules/simulator.h"

namespace tensorplay::pipelining {
namespace {

namespace sc = schedules;

std::string format_bytes(double bytes) {
  char text[32];
  if (bytes >= 1e9)
    std::snprintf(text, sizeof text, "%.2f GB", bytes / 1e9);
  else if (bytes >= 1e6)
    std::snprintf(text, sizeof text, "%.2f MB", bytes / 1e6);
  else if (bytes >= 1e3)
    std::snprintf(text, sizeof text, "%.0f kB", bytes / 1e3);
  else
    std::snprintf(text, sizeof text, "%.0f B", bytes);
  return text;
}

// The policies of one (schedule, stages per rank, microbatches), built once and reset by each
// simulation.
struct Policies {
  std::vector<std::unique_ptr<sc::SchedulePolicy>> owned;
  std::vector<sc::SchedulePolicy*> pointers;
  std::vector<int> stage_to_rank;
};

Policies make_policies(sc::ScheduleKind kind, int ranks, int spr, int n_microbatches) {
  Policies p;
  sc::PipelineOrder order = sc::generate_order(kind, ranks, spr, n_microbatches);
  p.stage_to_rank = sc::stage_to_rank(kind, ranks, spr);
  for (sc::RankOrder& rank : order) {
    p.owned.push_back(sc::make_static_order_policy(std::move(rank)));
    p.pointers.push_back(p.owned.back().get());
  }
  return p;
}

// Simulates `choice` under `policies` and fills in its predictions.
void simulate_into(const Profile& profile, const detail::PlanContext& context,
                   const Policies& policies, PlanChoice& choice) {
  const sc::CostModel costs = detail::cost_model(profile, context, choice);
  sc::SimulationOptions options;
  options.record_timeline = !costs.memory.empty();  // predict_memory replays the timeline
  const sc::SimulationResult r =
      sc::simulate(policies.pointers, policies.stage_to_rank, choice.n_microbatches, costs, options);
  choice.optimizer_seconds =
      detail::optimizer_seconds(profile, context, choice, policies.stage_to_rank);
  choice.step_seconds = r.makespan + choice.optimizer_seconds;
  choice.bubble = r.bubble_fraction;
  choice.transfer_share = detail::transfer_share(costs, policies.stage_to_rank);
  // The simulator's memory model (predict_memory); no bytes in the profile: none predicted.
  choice.peak_bytes = r.peak_bytes;
  choice.peak_bytes.resize(static_cast<size_t>(choice.ranks), 0.0);
  choice.feasible = true;
  choice.why.clear();
  if (context.memory_cap > 0) {
    for (size_t rank = 0; rank < choice.peak_bytes.size(); ++rank) {
      if (choice.peak_bytes[rank] <= context.memory_cap) continue;
      choice.feasible = false;
      choice.why = "over the memory cap: rank " + std::to_string(rank) + " needs " +
                   format_bytes(choice.peak_bytes[rank]) + " > " + format_bytes(context.memory_cap);
      break;
    }
  }
}

// The ranks whose predicted bytes are over the cap.
std::vector<int> ranks_over_cap(const PlanChoice& c, double cap) {
  std::vector<int> over;
  for (size_t r = 0; r < c.peak_bytes.size(); ++r)
    if (cap > 0 && c.peak_bytes[r] > cap) over.push_back(static_cast<int>(r));
  return over;
}

class Search {
 public:
  Search(const Profile& profile, const PlanRequest& request)
      : profile_(profile), request_(request), context_(detail::make_context(profile, request)) {}

  PlanResult run() {
    const auto start = std::chrono::steady_clock::now();
    std::vector<sc::ScheduleKind> kinds = request_.schedules;
    if (kinds.empty()) kinds = sc::all_schedule_kinds();
    for (sc::ScheduleKind kind : kinds)
      for (int spr : stage_counts(kind)) for_stages(kind, spr);
    rank_all();
    result_.channel = context_.channel.kind;
    result_.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return std::move(result_);
  }

 private:
  std::vector<int> stage_counts(sc::ScheduleKind kind) const {
    if (sc::is_single_stage_per_rank(kind)) return {1};
    if (sc::placement_of(kind) == sc::Placement::V) return {2};
    return request_.stages_per_rank;
  }

  void refuse(PlanChoice c, std::string why) {
    c.feasible = false;
    c.why = std::move(why);
    result_.ranked.push_back(std::move(c));
  }

  void for_stages(sc::ScheduleKind kind, int spr) {
    PlanChoice base;
    base.schedule = kind;
    base.ranks = request_.world;
    base.stages_per_rank = spr;
    const int segments = static_cast<int>(profile_.segments.size());
    if (base.num_stages() > segments) {
      base.n_microbatches = 0;
      return refuse(base, std::to_string(base.num_stages()) + " stages need at least as many " +
                              "segments; the profile has " + std::to_string(segments));
    }
    for (int64_t m = 1; m <= std::min<int64_t>(request_.batch, request_.max_microbatches); ++m) {
      if (request_.batch % m != 0) continue;
      base.n_microbatches = static_cast<int>(m);
      Policies policies;
      try {
        policies = make_policies(kind, base.ranks, spr, base.n_microbatches);
      } catch (const std::exception& e) {
        refuse(base, std::string("the schedule cannot run these sizes: ") + e.what());
        continue;
      }
      for_cuts(base, policies);
    }
  }

  void for_cuts(PlanChoice base, const Policies& policies) {
    const std::vector<double> costs = detail::segment_costs(profile_);
    std::vector<int> balanced = balanced_stage_begins(costs, base.num_stages());
    std::vector<int> even =
        detail::even_stage_begins(static_cast<int>(costs.size()), base.num_stages());
    base.cut = "balanced";
    base.stage_begin = balanced;
    for_threads(base, policies);
    if (even != balanced) {
      base.cut = "even";
      base.stage_begin = even;
      for_threads(base, policies);
    }
  }

  void for_threads(PlanChoice base, const Policies& policies) {
    for (int t : context_.thread_options) {
      base.threads = t;
      for_recompute(base, policies);
    }
  }

  void evaluate(PlanChoice c, const Policies& policies) {
    simulate_into(profile_, context_, policies, c);
    ++result_.configs;
    result_.ranked.push_back(std::move(c));
  }

  void for_recompute(PlanChoice base, const Policies& policies) {
    base.recompute.assign(base.num_stages(), false);
    simulate_into(profile_, context_, policies, base);
    ++result_.configs;
    const std::vector<int> over = ranks_over_cap(base, context_.memory_cap);
    result_.ranked.push_back(base);
    if (!request_.try_recompute) return;
    PlanChoice all = base;
    all.recompute.assign(base.num_stages(), true);
    evaluate(all, policies);
    if (over.empty() || static_cast<int>(over.size()) == base.ranks) return;
    PlanChoice some = base;  // recompute only on the ranks that need it
    for (int s = 0; s < some.num_stages(); ++s)
      for (int r : over) some.recompute[s] = some.recompute[s] || policies.stage_to_rank[s] == r;
    evaluate(some, policies);
  }

  void rank_all() {
    std::stable_sort(result_.ranked.begin(), result_.ranked.end(),
                     [](const PlanChoice& a, const PlanChoice& b) {
                       if (a.feasible != b.feasible) return a.feasible;
                       if (!a.feasible) return false;
                       // Equal times (up to rounding): the one holding fewer bytes first, then
                       // the one recomputing fewer stages (a stage whose F keeps its
                       // activations for the backward right after recomputes at no cost).
                       const double tie = 1e-9 * std::max(a.step_seconds, b.step_seconds);
                       if (std::abs(a.step_seconds - b.step_seconds) > tie)
                         return a.step_seconds < b.step_seconds;
                       if (a.max_peak_bytes() != b.max_peak_bytes())
                         return a.max_peak_bytes() < b.max_peak_bytes();
                       return std::count(a.recompute.begin(), a.recompute.end(), true) <
                              std::count(b.recompute.begin(), b.recompute.end(), true);
                     });
    if (result_.ranked.empty() || !result_.ranked.front().feasible) return;
    const PlanChoice& best = result_.ranked.front();
    for (size_t i = 1; i < result_.ranked.size() && result_.ranked[i].feasible; ++i)
      result_.ranked[i].why = detail::why_slower(result_.ranked[i], best);
  }

  const Profile& profile_;
  const PlanRequest& request_;
  detail::PlanContext context_;
  PlanResult result_;
};

}  // namespace

PlanResult plan(const Profile& profile, const PlanRequest& request) {
  return Search(profile, request).run();
}

PlanChoice predict(const Profile& profile, const PlanRequest& request, PlanChoice choice) {
  const detail::PlanContext context = detail::make_context(profile, request);
  const Policies policies =
      make_policies(choice.schedule, choice.ranks, choice.stages_per_rank, choice.n_microbatches);
  if (choice.recompute.empty()) choice.recompute.assign(choice.num_stages(), false);
  detail::check_choice(profile, choice);
  simulate_into(profile, context, policies, choice);
  return choice;
}

sc::SimulationResult simulate_choice(const Profile& profile, const PlanRequest& request,
                                     PlanChoice choice) {
  const detail::PlanContext context = detail::make_context(profile, request);
  const Policies policies =
      make_policies(choice.schedule, choice.ranks, choice.stages_per_rank, choice.n_microbatches);
  if (choice.recompute.empty()) choice.recompute.assign(choice.num_stages(), false);
  detail::check_choice(profile, choice);
  return sc::simulate(policies.pointers, policies.stage_to_rank, choice.n_microbatches,
                      detail::cost_model(profile, context, choice));
}

std::vector<int> balanced_stage_begins(const std::vector<double>& costs, int stages) {
  const int n = static_cast<int>(costs.size());
  if (stages < 1 || stages > n)
    throw std::invalid_argument("balanced_stage_begins: cannot cut " + std::to_string(n) +
                                " segments into " + std::to_string(stages) + " stages");
  std::vector<double> prefix(n + 1, 0.0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + costs[i];
  const double inf = std::numeric_limits<double>::infinity();
  // best[k][i]: the smallest slowest stage of segments [0, i) in k stages; from[k][i]: where the
  // last of those stages begins.
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int>> from(stages + 1, std::vector<int>(n + 1, 0));
  best[0][0] = 0.0;
  for (int k = 1; k <= stages; ++k)
    for (int i = k; i <= n; ++i)
      for (int j = k - 1; j < i; ++j) {
        const double v = std::max(best[k - 1][j], prefix[i] - prefix[j]);
        if (v < best[k][i] - 1e-15) {
          best[k][i] = v;
          from[k][i] = j;
        }
      }
  std::vector<int> begins(stages);
  for (int k = stages, i = n; k >= 1; --k) {
    begins[k - 1] = from[k][i];
    i = from[k][i];
  }
  return begins;
}

}  // namespace tensorplay::pipelining
