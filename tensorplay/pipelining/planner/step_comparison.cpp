// Predicted against measured (step_comparison.h).
#include "tensorplay/pipelining/planner/step_comparison.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

#include "tensorplay/pipelining/planner/plan.h"

namespace tensorplay::pipelining {
namespace {

namespace sc = schedules;

constexpr int kKinds = static_cast<int>(sc::ActionKind::ReduceGrad) + 1;

// Per action kind: how many ran and their total duration.
struct KindTotals {
  std::vector<size_t> count = std::vector<size_t>(kKinds, 0);
  std::vector<double> seconds = std::vector<double>(kKinds, 0.0);
};

KindTotals kind_totals(const sc::SimulationResult& r, double seconds_per_unit) {
  KindTotals t;
  for (const sc::TimelineEvent& e : r.timeline) {
    const int k = static_cast<int>(e.action.kind);
    ++t.count[k];
    t.seconds[k] += (e.end - e.start) * seconds_per_unit;
  }
  return t;
}

std::string kind_counts(const KindTotals& t) {
  std::string out;
  for (int k = 0; k < kKinds; ++k)
    if (t.count[k] > 0)
      out += (out.empty() ? "" : ", ") + std::to_string(t.count[k]) + " " +
             std::string(sc::kind_name(static_cast<sc::ActionKind>(k)));
  return out.empty() ? "no actions" : out;
}

std::string percent(double error) {
  if (!std::isfinite(error)) return "n/a";
  char text[32];
  std::snprintf(text, sizeof text, "%+.1f%%", 100 * error);
  return text;
}

// "P / M us (E)": a time in seconds shown in microseconds.
std::string times(const ComparedFigure& f) {
  char text[96];
  std::snprintf(text, sizeof text, "%.0f / %.0f us (%s)", f.predicted * 1e6, f.measured * 1e6,
                percent(f.error()).c_str());
  return text;
}

std::string bytes(const ComparedFigure& f) {
  char text[96];
  std::snprintf(text, sizeof text, "%.0f / %.0f bytes (%s)", f.predicted, f.measured,
                percent(f.error()).c_str());
  return text;
}

}  // namespace

double ComparedFigure::error() const {
  if (measured != 0) return (predicted - measured) / measured;
  return predicted == 0 ? 0.0 : std::numeric_limits<double>::infinity();
}

sc::SimulationResult predict_plan_step(const Profile& profile, const Plan& plan,
                                       bool separate_processes) {
  const std::vector<std::string> names = profile.segment_names();
  PlanChoice c;
  c.schedule = plan.schedule;
  c.ranks = plan.ranks;
  c.stages_per_rank = plan.stages_per_rank;
  c.n_microbatches = plan.n_microbatches;
  c.stage_begin = {0};
  for (const std::string& split : plan.split) {
    const auto it = std::find(names.begin(), names.end(), split);
    if (it == names.end() || split.empty())
      throw std::invalid_argument("the plan cuts at '" + split + "', which the profile of " +
                                  profile.model +
                                  " has no segment for; pass the profile the plan was made from");
    c.stage_begin.push_back(static_cast<int>(it - names.begin()));
  }
  c.recompute = plan.recompute;
  c.threads = plan.threads;
  c.cut = "given";
  PlanRequest request;
  request.world = plan.ranks;
  request.batch = plan.batch;
  request.one_process = !separate_processes;
  return simulate_choice(profile, request, c);
}

StepComparison compare_step(const sc::SimulationResult& predicted,
                            const sc::SimulationResult& measured, double measured_seconds_per_unit,
                            const std::vector<double>& measured_peak_bytes) {
  const double unit = measured_seconds_per_unit;
  if (predicted.busy.size() != measured.busy.size())
    throw std::invalid_argument("the measured step has " + std::to_string(measured.busy.size()) +
                                " ranks and the prediction " +
                                std::to_string(predicted.busy.size()) +
                                "; pass the plan (and profile) the run used");
  const KindTotals p = kind_totals(predicted, 1.0), m = kind_totals(measured, unit);
  if (p.count != m.count)
    throw std::invalid_argument("the measured step ran " + kind_counts(m) + " and the prediction " +
                                kind_counts(p) +
                                " (another schedule or microbatch count?); pass the plan the run "
                                "used");
  StepComparison out;
  out.step_seconds = {predicted.makespan, measured.makespan * unit};
  out.bubble = {predicted.bubble_fraction, measured.bubble_fraction};
  const bool bytes = !predicted.peak_activation_bytes.empty() && !measured_peak_bytes.empty();
  for (size_t r = 0; r < measured.busy.size(); ++r) {
    RankComparison rank;
    rank.rank = static_cast<int>(r);
    rank.step_seconds = {predicted.last_end[r], measured.last_end[r] * unit};
    rank.busy_seconds = {predicted.busy[r], measured.busy[r] * unit};
    rank.has_bytes = bytes && r < measured_peak_bytes.size();
    if (rank.has_bytes)
      rank.peak_bytes = {predicted.peak_activation_bytes[r], measured_peak_bytes[r]};
    out.ranks.push_back(rank);
  }
  for (int k = 0; k < kKinds; ++k)
    if (p.count[k] > 0)
      out.kinds.push_back({static_cast<sc::ActionKind>(k),
                           p.count[k],
                           {p.seconds[k] / p.count[k], m.seconds[k] / m.count[k]}});
  return out;
}

std::string format_step_comparison(const StepComparison& c) {
  std::string out = "predicted / measured (error):\n  step " + times(c.step_seconds) + ", bubble ";
  char text[64];
  std::snprintf(text, sizeof text, "%.1f%% / %.1f%%\n", 100 * c.bubble.predicted,
                100 * c.bubble.measured);
  out += text;
  for (const RankComparison& r : c.ranks) {
    out += "  rank " + std::to_string(r.rank) + ": step " + times(r.step_seconds) + ", busy " +
           times(r.busy_seconds);
    if (r.has_bytes) out += ", peak activations " + bytes(r.peak_bytes);
    out += "\n";
  }
  for (const KindComparison& k : c.kinds)
    out += "  " + std::string(sc::kind_name(k.kind)) + " (" + std::to_string(k.actions) +
           " actions): mean " + times(k.mean_seconds) + "\n";
  return out;
}

}  // namespace tensorplay::pipelining
