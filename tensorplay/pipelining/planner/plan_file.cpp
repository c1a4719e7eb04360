// Plan files (plan_file.h): JSON form and the checks against a model.
#include "tensorplay/pipelining/planner/plan_file.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "tensorplay/pipelining/planner/detail/files.h"
#include "tensorplay/schedules/csv.h"
#include "tensorplay/schedules/generators.h"

namespace tensorplay::pipelining {
namespace {

using nlohmann::json;
constexpr const char* kFormat = "tensorplay-plan";

template <typename T>
T get(const json& j, const char* key) {
  if (!j.contains(key)) throw std::invalid_argument(std::string("plan: no field '") + key + "'");
  try {
    return j.at(key).get<T>();
  } catch (const json::exception&) {
    throw std::invalid_argument(std::string("plan: field '") + key +
                                "' has the wrong type: " + j.at(key).dump());
  }
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

SplitSpec Plan::split_spec() const {
  SplitSpec spec;
  for (const std::string& name : split) spec[name] = SplitPoint::Beginning;
  return spec;
}

RecomputePolicy Plan::recompute_policy(int s) const {
  return recompute.at(s) ? RecomputePolicy::full() : RecomputePolicy::none();
}

Plan make_plan(const Profile& profile, const PlanChoice& c, int64_t batch) {
  Plan p;
  p.model = profile.model;
  p.schedule = c.schedule;
  p.ranks = c.ranks;
  p.stages_per_rank = c.stages_per_rank;
  p.n_microbatches = c.n_microbatches;
  p.batch = batch;
  p.segments = profile.segment_names();
  for (size_t s = 1; s < c.stage_begin.size(); ++s)
    p.split.push_back(profile.segments.at(c.stage_begin[s]).name);
  p.recompute = c.recompute;
  p.threads = c.threads;
  p.predicted_step_seconds = c.step_seconds;
  p.predicted_bubble = c.bubble;
  p.predicted_peak_bytes = c.peak_bytes;
  p.order_csv = schedules::dump_csv(
      schedules::generate_order(c.schedule, c.ranks, c.stages_per_rank, c.n_microbatches));
  return p;
}

std::string plan_to_json(const Plan& p) {
  json j = {{"format", kFormat},
            {"version", 1},
            {"model", p.model},
            {"schedule", std::string(schedules::schedule_name(p.schedule))},
            {"ranks", p.ranks},
            {"stages_per_rank", p.stages_per_rank},
            {"microbatches", p.n_microbatches},
            {"batch", p.batch},
            {"segments", p.segments},
            {"split", p.split},
            {"recompute", p.recompute},
            {"threads", p.threads},
            {"predicted",
             {{"step_seconds", p.predicted_step_seconds},
              {"bubble", p.predicted_bubble},
              {"peak_bytes", p.predicted_peak_bytes}}},
            {"order_csv", p.order_csv}};
  return j.dump(2) + "\n";
}

Plan plan_from_json(const std::string& text) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) throw std::invalid_argument("plan: not valid JSON");
  if (!j.is_object() || j.value("format", "") != kFormat)
    throw std::invalid_argument(std::string("plan: not a plan (its \"format\" must be \"") +
                                kFormat + "\")");
  Plan p;
  p.model = get<std::string>(j, "model");
  p.schedule = schedules::parse_schedule_kind(get<std::string>(j, "schedule"));
  p.ranks = get<int>(j, "ranks");
  p.stages_per_rank = get<int>(j, "stages_per_rank");
  p.n_microbatches = get<int>(j, "microbatches");
  p.batch = get<int64_t>(j, "batch");
  p.segments = get<std::vector<std::string>>(j, "segments");
  p.split = get<std::vector<std::string>>(j, "split");
  p.recompute = get<std::vector<bool>>(j, "recompute");
  p.threads = get<int>(j, "threads");
  const json predicted = get<json>(j, "predicted");
  p.predicted_step_seconds = get<double>(predicted, "step_seconds");
  p.predicted_bubble = get<double>(predicted, "bubble");
  p.predicted_peak_bytes = get<std::vector<double>>(predicted, "peak_bytes");
  p.order_csv = get<std::string>(j, "order_csv");
  if (p.ranks < 1 || p.stages_per_rank < 1 || p.n_microbatches < 1 || p.threads < 1 || p.batch < 1)
    throw std::invalid_argument(
        "plan: ranks, stages_per_rank, microbatches, threads and batch must be at least 1");
  if (static_cast<int>(p.split.size()) != p.num_stages() - 1 ||
      static_cast<int>(p.recompute.size()) != p.num_stages())
    throw std::invalid_argument("plan: " + std::to_string(p.num_stages()) + " stages need " +
                                std::to_string(p.num_stages() - 1) + " split names and " +
                                std::to_string(p.num_stages()) + " recompute entries");
  return p;
}

void save_plan(const Plan& plan, const std::string& path) {
  detail::write_text_file(path, plan_to_json(plan), "plan");
}

Plan load_plan(const std::string& path) {
  const std::string text = detail::read_text_file(path, "plan");
  try {
    return plan_from_json(text);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(path + ": " + e.what());
  }
}

void check_plan(const Plan& plan, const std::vector<std::string>& candidates, int world,
                int64_t batch) {
  std::string problems;
  const std::set<std::string> known(candidates.begin(), candidates.end());
  std::vector<std::string> missing;
  for (const std::string& name : plan.split)
    if (!known.count(name)) missing.push_back(name);
  if (!missing.empty())
    problems += "\n  it cuts at " + join(missing) + ", which this model does not have (its " +
                "split candidates: " + join(candidates) + "); profile and plan this model";
  if (plan.ranks != world)
    problems += "\n  it needs " + std::to_string(plan.ranks) + " ranks (" +
                std::to_string(plan.num_stages()) + " stages, " +
                std::to_string(plan.stages_per_rank) + " per rank) but the world has " +
                std::to_string(world) + "; start " + std::to_string(plan.ranks) +
                " ranks or plan for " + std::to_string(world);
  if (batch < 1 || batch % plan.n_microbatches != 0)
    problems += "\n  its " + std::to_string(plan.n_microbatches) +
                " microbatches do not divide the batch of " + std::to_string(batch) +
                "; use a batch that they divide, or plan for this one";
  if (!problems.empty())
    throw std::invalid_argument("plan for " + plan.model + " does not match this job:" + problems);
}

}  // namespace tensorplay::pipelining
