// bench_plan: does the planner pick well, and does the simulator predict the runtime? For
// train_gpt's GPT (default size), a larger GPT and the MLP of bench_pipeline_procs: profile the
// model (pp::profile, calibrated by one real run), plan it for two ranks (pp::plan, timed), then
// run a grid of configurations for real on the embedded runtime (schedules x microbatches x stage
// counts x recomputation, cut balanced on the profile) and the plan's pick, and compare each
// measured training step (the pipeline's, then the optimizer's: AdamW for the GPTs, SGD for the
// MLP) with its prediction, and with the prediction of the earlier, overhead-only calibration
// (compute as profiled, all of the calibration run's extra time per action). Last line:
// "pick_vs_best" (fastest measured over the pick's measured, 1 when the pick is fastest; a pick
// that is one of the grid's configurations counts both its samples),
// "within_8pct_share" (share of the grid predicted within 8%), "worst_prediction_error" and
// "worst_config", "planning_seconds" (the slowest model's search), "planning_configs_per_second",
// "configs" (configurations run), and the overhead-only model's share and worst error, those of
// the calibrated profile without its larger microbatches ("_proportional"), and those of one
// compute factor at every microbatch size (the profile microbatch's, "_one_factor": the
// calibration before it ran at each larger size too). With --rounds N the calibration runs
// again at the start of each round, and at each microbatch size the fastest counts.
// mlp-2proc adds the MLP in two processes (tp-launch) under 1F1B and ZBV, predicted over the
// profile's UCX channel (ucx_shm, the one the planner picks for ranks in processes of one host):
// "two_process_worst_error" (and "two_process_worst_error_overhead_only"); and, to tell whether
// the embedded calibration holds for processes, a calibration of the two-process mode itself
// (a logged 1F1B run) and its predictions: "two_process_worst_error_own_calibration".
//
// How well the machine repeats itself bounds how well any prediction can do: with rounds > 1,
// "repeatable_within_8pct_share" is the share of the grid whose fastest steps of each round agree
// within 8% (slowest round over fastest), "median_round_spread" the median of that spread less 1.
//
// --scaling-check yes instead profiles each model at its microbatch and at four times it and
// prints, per action kind, how far the planner's rule for other microbatch sizes is off.
//
//   ./build/bench/bench_plan [--models gpt,gpt-large,mlp,mlp-2proc] [--steps 5] [--warmup 1]
//                            [--rounds 3]   (rounds over the grid, each configuration's fastest)
//                            [--tp-launch PATH] [--scaling-check yes]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "mlp_pipeline_job.h"
#include "tensorplay/nn/gpt.h"
#include "tensorplay/pipelining/build_stage.h"
#include "tensorplay/pipelining/planner/calibrate.h"
#include "tensorplay/pipelining/planner/detail/plan_costs.h"
#include "tensorplay/pipelining/planner/plan.h"
#include "tensorplay/pipelining/planner/profile_run.h"
#include "two_process_calibration.h"

namespace {

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace sc = tensorplay::schedules;
using Clock = std::chrono::steady_clock;

// One model of the benchmark: how to build it, feed it and cut it.
struct Model {
  std::string name;
  std::shared_ptr<tp::nn::Module> module;
  std::vector<std::string> candidates;
  int64_t batch = 32;
  tp::Tensor x, y;  // one whole batch
  pp::LossFn loss;
  bool adamw = true;  // train_gpt's optimizer; false: SGD, as the MLP benchmarks
};

std::unique_ptr<tp::optim::Optimizer> make_optimizer(const Model& m, std::vector<tp::Tensor> p,
                                                     float lr) {
  if (m.adamw) return std::make_unique<tp::optim::AdamW>(p, tp::optim::AdamWOptions{.lr = lr});
  return std::make_unique<tp::optim::SGD>(p, tp::optim::SGDOptions{.lr = lr});
}

Model gpt(const std::string& name, int64_t layers, int64_t width) {
  const int64_t vocab = 86, context = 64;
  tp::manual_seed(0);
  Model m{name, tp::nn::GPT(tp::nn::GPTConfig{.vocab_size = vocab,
                                              .context_length = context,
                                              .n_layer = layers,
                                              .n_head = 4,
                                              .width = width})
                    .ptr()};
  for (int64_t b = 0; b < layers; ++b) m.candidates.push_back("blocks." + std::to_string(b));
  m.candidates.push_back("ln_f");
  tp::Generator gen(3);
  m.x = tp::randint(0, vocab, {m.batch, context}, {}, &gen);
  m.y = tp::randint(0, vocab, {m.batch, context}, {}, &gen);
  m.loss = [vocab](const tp::Tensor& logits, const tp::Tensor& targets) {
    return tp::cross_entropy(logits.reshape({-1, vocab}), targets.reshape({-1}));
  };
  return m;
}

Model mlp() {
  bench::MlpJob job;
  tp::manual_seed(0);
  Model m{"mlp", bench::Mlp(job.width, job.blocks).ptr()};
  for (int64_t b = 1; b < job.blocks; ++b) m.candidates.push_back("blocks." + std::to_string(b));
  m.batch = job.batch;
  bench::MlpData data(job);
  m.x = data.x;
  m.y = data.y;
  m.loss = tp::nn::mse_loss;
  m.adamw = false;
  return m;
}

// A calibrated profile, and the same under the earlier model for comparison: compute as profiled
// (factor 1) and all of the calibration run's extra time charged per action.
struct Profiles {
  pp::Profile calibrated, overhead_only;
  pp::Profile proportional;  ///< calibrated, without the larger microbatches' times and factors
  pp::Profile one_factor;    ///< calibrated, the profile microbatch's factor at every size
};

// The profile of `m` at microbatches of `rows` samples, as the benchmark measures it, with the
// segments also timed at `larger` multiples of it.
pp::Profile profile_at(Model& m, int64_t rows, const std::vector<int>& larger = {}) {
  pp::ProfileOptions o;
  o.candidates = m.candidates;
  o.model_name = m.name;
  o.loss_fn = m.loss;
  o.target = m.y.slice0(0, rows);
  o.repeats = 5;
  o.thread_counts = {1};
  o.larger_microbatches = larger;
  o.optimizer = [&m](std::vector<tp::Tensor> p) { return make_optimizer(m, std::move(p), 0.0f); };
  return pp::profile(*m.module, {m.x.slice0(0, rows)}, o);
}

// "samples: factor (measured step s), ..." of the fit's larger microbatches.
std::string sized_factors(const pp::CalibrationFit& fit) {
  std::string out;
  for (size_t i = 0; i < fit.larger_compute_factors.size(); ++i) {
    char one[96];
    std::snprintf(one, sizeof one, "%s%lld: %.3f (%.5f s)", i ? ", " : "",
                  static_cast<long long>(fit.larger_compute_factors[i].samples),
                  fit.larger_compute_factors[i].compute_factor, fit.larger_measured_steps[i]);
    out += one;
  }
  return out;
}

// One calibration of `profile` (pp::calibrate_profile: at its microbatch and each larger one
// it measured; it sets the figures), printed.
pp::CalibrationFit calibrate(Model& m, pp::Profile& profile, int round) {
  const int64_t rows = m.batch / 8;
  const pp::CalibrationFit fit =
      pp::calibrate_profile(profile, *m.module, {m.x.slice0(0, rows)},
                            {.loss_fn = m.loss, .target = m.y.slice0(0, rows)});
  std::printf(
      "{\"model\": \"%s\", \"calibration\": \"1F1B, 2 ranks, embedded\", \"round\": %d, "
      "\"compute_factor\": %.3f, \"action_overhead_s\": %.3g, \"measured_step_s\": %.5f, "
      "\"uncalibrated_step_s\": %.5f, \"calibrated_step_s\": %.5f, \"measured_compute_s\": %.5f, "
      "\"profiled_compute_s\": %.5f, \"larger_compute_factors\": \"%s\"}\n",
      m.name.c_str(), round, fit.compute_factor, fit.action_overhead, fit.measured_step,
      fit.predicted_step, fit.calibrated_step, fit.measured_compute, fit.predicted_compute,
      sized_factors(fit).c_str());
  std::fflush(stdout);
  return fit;
}

// The three profiles from the calibrated one and its fit.
Profiles profiles_from(const pp::Profile& calibrated, const pp::CalibrationFit& fit) {
  Profiles out{calibrated, calibrated, calibrated, calibrated};
  out.overhead_only.compute_factor = 1;
  out.overhead_only.larger_compute_factors.clear();
  out.overhead_only.action_overhead = fit.overhead_only;
  for (pp::SegmentProfile& s : out.proportional.segments) s.larger.clear();
  out.proportional.larger_compute_factors.clear();
  out.one_factor.larger_compute_factors.clear();
  return out;
}

// Seconds per training step (the pipeline's, then the optimizer's) of `c` on the embedded
// runtime: best of `steps` after `warmup`.
double measure(Model& m, const pp::Profile& profile, const pp::PlanChoice& c, int steps,
               int warmup) {
  pp::PipelineOptions cut;
  for (size_t s = 1; s < c.stage_begin.size(); ++s)
    cut.split_spec[profile.segments[c.stage_begin[s]].name] = pp::SplitPoint::Beginning;
  pp::Pipe pipe = pp::pipeline(*m.module, {m.x.slice0(0, m.batch / c.n_microbatches)}, cut);
  auto stages = pp::build_stages(pipe, {tp::cpu()});
  for (auto& stage : stages) {
    stage->set_num_threads(c.threads);
    if (c.recompute.at(stage->stage_index())) stage->set_recompute(pp::RecomputePolicy::full());
  }
  pp::PipelineSchedule schedule(stages, c.n_microbatches, m.loss, c.schedule,
                                {.stages_per_rank = c.stages_per_rank});
  auto opt = make_optimizer(m, pp::parameters(stages), 1e-4f);
  double best = 1e30;
  for (int i = 0; i < warmup + steps; ++i) {
    const auto start = Clock::now();
    schedule.step({m.x}, {.target = m.y});
    opt->step();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (i >= warmup) best = std::min(best, seconds);
    opt->zero_grad();
  }
  return best;
}

// How well the profile's rule for other microbatch sizes holds: `m` profiled at the benchmark's
// microbatch (batch / 8) and at four times it, and per action kind the larger profile's time
// (all segments) against the smaller one's scaled as the planner scales a profile without larger
// sizes (plan_costs.cpp: each segment's overhead stays, the rest grows with the samples), which
// is why the benchmark's profiles measure larger ones. One line per model.
void scaling_check(Model m) {
  const int64_t rows = m.batch / 8;
  const pp::Profile small = profile_at(m, rows), large = profile_at(m, 4 * rows);
  auto scaled = [](double seconds, double overhead) {
    const double fixed = std::min(seconds, overhead);
    return fixed + (seconds - fixed) * 4.0;
  };
  const char* kinds[] = {"F", "B", "I", "W"};
  double measured[4] = {0, 0, 0, 0}, predicted[4] = {0, 0, 0, 0};
  for (size_t i = 0; i < small.segments.size(); ++i) {
    const pp::SegmentProfile &s = small.segments[i], &l = large.segments[i];
    const double small_times[4] = {s.forward, s.full_backward, s.input_backward, s.weight_backward};
    const double large_times[4] = {l.forward, l.full_backward, l.input_backward, l.weight_backward};
    for (int k = 0; k < 4; ++k) {
      measured[k] += large_times[k];
      predicted[k] += scaled(small_times[k], s.overhead);
    }
  }
  std::printf("{\"model\": \"%s\", \"scaling\": \"%lld -> %lld samples\"", m.name.c_str(),
              static_cast<long long>(rows), static_cast<long long>(4 * rows));
  for (int k = 0; k < 4; ++k)
    std::printf(", \"%s_measured_s\": %.5f, \"%s_predicted_s\": %.5f, \"%s_error\": %.3f", kinds[k],
                measured[k], kinds[k], predicted[k], kinds[k], predicted[k] / measured[k] - 1);
  std::printf("}\n");
  std::fflush(stdout);
}

// The grid: four schedules x three microbatch counts x recomputation off and on, on 2 ranks.
std::vector<pp::PlanChoice> grid(const pp::Profile& profile) {
  std::vector<double> costs;
  for (const pp::SegmentProfile& s : profile.segments) costs.push_back(s.forward + s.full_backward);
  std::vector<pp::PlanChoice> out;
  for (sc::ScheduleKind kind : {sc::ScheduleKind::GPipe, sc::ScheduleKind::OneFOneB,
                                sc::ScheduleKind::Interleaved1F1B, sc::ScheduleKind::ZBVZeroBubble})
    for (int m : {2, 4, 8})
      for (bool recompute : {false, true}) {
        pp::PlanChoice c;
        c.schedule = kind;
        c.ranks = 2;
        c.stages_per_rank = sc::is_single_stage_per_rank(kind) ? 1 : 2;
        c.n_microbatches = m;
        c.stage_begin = pp::balanced_stage_begins(costs, c.num_stages());
        c.recompute.assign(c.num_stages(), recompute);
        c.cut = "balanced";
        out.push_back(c);
      }
  return out;
}

// The grid's errors, under the calibrated model and under the overhead-only one.
struct Errors {
  int within = 0;
  double worst = 0;
  std::string worst_config;
  void add(const std::string& config, double predicted, double measured) {
    const double error = std::abs(predicted / measured - 1);
    within += error <= 0.08 ? 1 : 0;
    if (error > worst) worst = error, worst_config = config;
  }
};

// One configuration's predictions by the other models, for comparison.
struct Alternatives {
  double overhead_only = 0;  ///< the earlier calibration: compute as profiled, time per action
  double proportional = 0;   ///< times in proportion to the samples beyond each overhead
  double one_factor = 0;     ///< one compute factor, the profile microbatch's, at every size
};

Alternatives alternatives(const Profiles& p, const pp::PlanRequest& r, const pp::PlanChoice& c) {
  return {pp::predict(p.overhead_only, r, c).step_seconds,
          pp::predict(p.proportional, r, c).step_seconds,
          pp::predict(p.one_factor, r, c).step_seconds};
}

struct Figures {
  int configs = 0;
  Errors calibrated, overhead_only, proportional, one_factor;
  double two_process_worst = -1, two_process_worst_overhead_only = -1;  // -1: not run
  double two_process_worst_own_calibration = -1;
  double planning_seconds = 0, pick_vs_best = 1;  // each model's is <= 1
  double configs_per_second = 1e30;               // the slowest search's
  // How well the machine repeats itself: per grid configuration, its fastest step in each round,
  // the slowest round's over the fastest round's, less 1.
  std::vector<double> round_spreads;
  void add_rounds(const std::vector<double>& per_round) {
    if (per_round.size() < 2) return;
    const auto [lo, hi] = std::minmax_element(per_round.begin(), per_round.end());
    round_spreads.push_back(*hi / *lo - 1);
  }
  double repeatable_share() const {  // configurations whose rounds agree within 8%
    if (round_spreads.empty()) return 0;
    return double(std::count_if(round_spreads.begin(), round_spreads.end(),
                                [](double d) { return d <= 0.08; })) /
           double(round_spreads.size());
  }
  double median_spread() const {
    if (round_spreads.empty()) return 0;
    std::vector<double> v = round_spreads;
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  }
};

// One configuration run: its predictions (calibrated, and by the other models for comparison)
// beside the measured step, counted in `f` unless it is the pick (which the grid holds or not).
void report_config(const std::string& model, const pp::PlanChoice& c, const Alternatives& a,
                   double measured, bool pick, Figures& f) {
  std::printf(
      "{\"model\": \"%s\", \"config\": \"%s\", \"pick\": %s, \"predicted_s\": %.5f, "
      "\"measured_s\": %.5f, \"error\": %.3f, \"predicted_overhead_only_s\": %.5f, "
      "\"error_overhead_only\": %.3f, \"predicted_proportional_s\": %.5f, "
      "\"error_proportional\": %.3f, \"predicted_one_factor_s\": %.5f, \"error_one_factor\": "
      "%.3f}\n",
      model.c_str(), c.describe().c_str(), pick ? "true" : "false", c.step_seconds, measured,
      c.step_seconds / measured - 1, a.overhead_only, a.overhead_only / measured - 1,
      a.proportional, a.proportional / measured - 1, a.one_factor, a.one_factor / measured - 1);
  std::fflush(stdout);
  if (pick) return;
  const std::string config = model + ": " + c.describe();
  f.calibrated.add(config, c.step_seconds, measured);
  f.overhead_only.add(config, a.overhead_only, measured);
  f.proportional.add(config, a.proportional, measured);
  f.one_factor.add(config, a.one_factor, measured);
  ++f.configs;
}

// Two calibrations of one profile merged size by size: at each microbatch, the figures of the
// run whose step there was faster (the action overhead and the overhead-only figure go with the
// profile microbatch's).
pp::CalibrationFit fastest_per_size(const pp::CalibrationFit& a, const pp::CalibrationFit& b) {
  pp::CalibrationFit out = b.measured_step < a.measured_step ? b : a;
  for (size_t i = 0; i < out.larger_compute_factors.size(); ++i) {
    const pp::CalibrationFit& faster =
        b.larger_measured_steps.at(i) < a.larger_measured_steps.at(i) ? b : a;
    out.larger_compute_factors[i] = faster.larger_compute_factors.at(i);
    out.larger_measured_steps[i] = faster.larger_measured_steps[i];
  }
  return out;
}

// `profile` with the figures of `fit`.
pp::Profile with_fit(pp::Profile profile, const pp::CalibrationFit& fit) {
  profile.compute_factor = fit.compute_factor;
  profile.larger_compute_factors = fit.larger_compute_factors;
  profile.action_overhead = fit.action_overhead;
  return profile;
}

// Each configuration's fastest over the rounds, from its fastest step of each round.
std::vector<double> fastest_of(const std::vector<std::vector<double>>& per_round) {
  std::vector<double> out;
  for (const std::vector<double>& r : per_round)
    out.push_back(*std::min_element(r.begin(), r.end()));
  return out;
}

// Whether `a` and `b` run the same: schedule, placement, microbatches, cut, recomputation and
// threads.
bool same_configuration(const pp::PlanChoice& a, const pp::PlanChoice& b) {
  return a.schedule == b.schedule && a.ranks == b.ranks && a.stages_per_rank == b.stages_per_rank &&
         a.n_microbatches == b.n_microbatches && a.stage_begin == b.stage_begin &&
         a.recompute == b.recompute && a.threads == b.threads;
}

void run_model(Model m, int steps, int warmup, int rounds, Figures& f) {
  pp::Profile profile = profile_at(m, m.batch / 8, {2, 4});  // the grid's microbatches
  pp::CalibrationFit fit = calibrate(m, profile, 0);
  Profiles profiles = profiles_from(profile, fit);
  const pp::PlanRequest request{.world = 2, .batch = m.batch};
  const auto start = Clock::now();
  const pp::PlanResult result = pp::plan(profile, request);
  const double planning = std::chrono::duration<double>(Clock::now() - start).count();
  f.planning_seconds = std::max(f.planning_seconds, planning);
  f.configs_per_second = std::min(f.configs_per_second, result.configs / std::max(planning, 1e-9));
  std::printf("{\"model\": \"%s\", \"planning_seconds\": %.4f, \"planned_configs\": %zu}\n",
              m.name.c_str(), planning, result.configs);
  // The grid and the pick, each measured once a round, rounds one after another: a slow spell of
  // the machine falls on every configuration alike. Each keeps its fastest, and so does the
  // calibration, run again at the start of every later round: the predictions reported take, at
  // each microbatch size, the calibration whose step there was fastest (the pick stays the one
  // planned before any round).
  std::vector<pp::PlanChoice> choices = grid(profile);
  choices.push_back(result.best());
  std::vector<std::vector<double>> per_round(choices.size());
  for (int round = 0; round < rounds; ++round) {
    if (round > 0) {
      pp::Profile again = profile;
      fit = fastest_per_size(fit, calibrate(m, again, round));
      profiles = profiles_from(with_fit(profile, fit), fit);
    }
    for (size_t i = 0; i < choices.size(); ++i)
      per_round[i].push_back(measure(m, profile, choices[i], steps, warmup));
  }
  for (size_t i = 0; i + 1 < choices.size(); ++i) f.add_rounds(per_round[i]);
  std::vector<double> measured = fastest_of(per_round);
  // A pick that is one of the grid's configurations was measured twice: both samples are of one
  // configuration, so both count for it (the same configuration measured apart in one run has
  // differed by up to 14% here, which would otherwise be read as the pick's loss).
  for (size_t i = 0; i + 1 < choices.size(); ++i)
    if (same_configuration(choices[i], choices.back()))
      measured[i] = measured.back() = std::min(measured[i], measured.back());
  for (pp::PlanChoice& c : choices) c = pp::predict(profiles.calibrated, request, c);
  double best = 1e30;
  for (size_t i = 0; i + 1 < choices.size(); ++i) {
    best = std::min(best, measured[i]);
    report_config(m.name, choices[i], alternatives(profiles, request, choices[i]), measured[i],
                  false, f);
  }
  const pp::PlanChoice& pick = choices.back();
  const double picked = measured.back();
  report_config(m.name, pick, alternatives(profiles, request, pick), picked, true, f);
  f.pick_vs_best = std::min(f.pick_vs_best, std::min(best, picked) / picked);
}

// What the two-process predictions rest on besides the segments: the channel and the runtime's
// calibrated time per action.
void print_costs(const pp::Profile& profile, const pp::PlanRequest& request) {
  const pp::ChannelProfile channel = pp::plan_channel(profile, request);
  std::printf(
      "{\"model\": \"mlp, 2 processes\", \"channel\": \"%s\", \"latency_s\": %.3g, "
      "\"bandwidth_bytes_per_s\": %.3g, \"in_process_latency_s\": %.3g, "
      "\"action_overhead_s\": %.3g, \"compute_factor\": %.3f}\n",
      channel.kind.c_str(), channel.latency, channel.bandwidth,
      profile.channel("in_process").latency, profile.action_overhead, profile.compute_factor);
  std::fflush(stdout);
}

// The MLP's configuration in two processes: `kind` at `microbatches`, the even cut the workers
// use, the schedule's default stages per rank.
pp::PlanChoice two_process_choice(sc::ScheduleKind kind, int n_microbatches, int64_t blocks) {
  pp::PlanChoice c;
  c.schedule = kind;
  c.ranks = 2;
  c.stages_per_rank = sc::default_stages_per_rank(kind);
  c.n_microbatches = n_microbatches;
  c.stage_begin = pp::detail::even_stage_begins(static_cast<int>(blocks), c.num_stages());
  c.recompute.assign(c.num_stages(), false);
  c.cut = "even";
  return c;
}

// Whether the embedded calibration holds for two processes: 1F1B at 4 microbatches calibrated
// in two processes itself (its message logs), and a profile with that mode's own figures.
pp::Profile own_calibration(const std::string& tp_launch, const bench::MlpJob& job,
                            const pp::Profile& profile, const pp::PlanRequest& request) {
  const pp::CalibrationFit fit =
      bench::fit_two_processes(tp_launch, job, profile, request,
                               two_process_choice(sc::ScheduleKind::OneFOneB, 4, job.blocks));
  std::printf(
      "{\"model\": \"mlp, 2 processes\", \"calibration\": \"1F1B, 2 processes\", "
      "\"compute_factor\": %.3f, \"action_overhead_s\": %.3g, \"measured_step_s\": %.5f, "
      "\"uncalibrated_step_s\": %.5f, \"calibrated_step_s\": %.5f}\n",
      fit.compute_factor, fit.action_overhead, fit.measured_step, fit.predicted_step,
      fit.calibrated_step);
  std::fflush(stdout);
  pp::Profile own = profile;
  own.compute_factor = fit.compute_factor;  // one size calibrated: its factor at every size
  own.larger_compute_factors.clear();
  own.action_overhead = fit.action_overhead;
  return own;
}

// The fastest step of each of `choices` of the MLP in two processes, measured `rounds` times over
// one configuration after another (as the grid's rounds).
std::vector<double> measure_two_processes(const std::string& tp_launch, bench::MlpJob job,
                                          const std::vector<pp::PlanChoice>& choices, int rounds,
                                          Figures& f) {
  std::vector<std::vector<double>> per_round(choices.size());
  for (int round = 0; round < rounds; ++round)
    for (size_t i = 0; i < choices.size(); ++i) {
      job.n_microbatches = choices[i].n_microbatches;
      const bench::PipelineRun run = bench::launch_pipeline(
          tp_launch, job, std::string(sc::schedule_name(choices[i].schedule)));
      if (!run.error.empty()) throw std::runtime_error(run.error);
      per_round[i].push_back(run.best_step_seconds);  // best of its steps
    }
  for (const std::vector<double>& r : per_round) f.add_rounds(r);
  return fastest_of(per_round);
}

// The MLP in two processes (tp-launch, this executable's worker mode: even cut, the schedule's
// default stages per rank, each process's SGD step included; the fastest of its timed steps over
// the rounds) under 1F1B and ZBV at 4 and 8 microbatches, predicted over the channel the planner
// picks for processes of one host with the embedded calibration (counted in the grid), and with the
// two-process mode's own for comparison.
void run_two_processes(const std::string& tp_launch, int steps, int warmup, int rounds,
                       Figures& f) {
  Model m = mlp();
  pp::Profile calibrated = profile_at(m, m.batch / 8, {2, 4});
  pp::CalibrationFit fit = calibrate(m, calibrated, 0);
  for (int round = 1; round < rounds; ++round) {  // as the grid's: each size's fastest
    pp::Profile again = calibrated;
    fit = fastest_per_size(fit, calibrate(m, again, round));
  }
  const Profiles profiles = profiles_from(with_fit(calibrated, fit), fit);
  const pp::Profile& profile = profiles.calibrated;
  const pp::PlanRequest request{.world = 2, .batch = m.batch, .one_process = false};
  print_costs(profile, request);
  bench::MlpJob job;
  job.steps = steps;
  job.warmup = warmup;
  const pp::Profile own = own_calibration(tp_launch, job, profile, request);
  std::vector<pp::PlanChoice> choices;
  for (sc::ScheduleKind kind : {sc::ScheduleKind::OneFOneB, sc::ScheduleKind::ZBVZeroBubble})
    for (int n_microbatches : {4, 8})
      choices.push_back(
          pp::predict(profile, request, two_process_choice(kind, n_microbatches, job.blocks)));
  const std::vector<double> measured = measure_two_processes(tp_launch, job, choices, rounds, f);
  for (size_t i = 0; i < choices.size(); ++i) {
    const pp::PlanChoice& c = choices[i];
    const Alternatives before = alternatives(profiles, request, c);
    const double own_mode = pp::predict(own, request, c).step_seconds;
    f.two_process_worst = std::max(f.two_process_worst, std::abs(c.step_seconds / measured[i] - 1));
    f.two_process_worst_overhead_only = std::max(f.two_process_worst_overhead_only,
                                                 std::abs(before.overhead_only / measured[i] - 1));
    f.two_process_worst_own_calibration =
        std::max(f.two_process_worst_own_calibration, std::abs(own_mode / measured[i] - 1));
    std::printf(
        "{\"model\": \"mlp, 2 processes\", \"config\": \"%s\", "
        "\"predicted_own_calibration_s\": %.5f, \"error_own_calibration\": %.3f}\n",
        c.describe().c_str(), own_mode, own_mode / measured[i] - 1);
    report_config("mlp, 2 processes", c, before, measured[i], false, f);
  }
}

std::string text_option(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return fallback;
}

// The last line: the grid's figures under the calibrated model, then under the overhead-only one.
void print_summary(const std::string& models, const Figures& f) {
  auto share = [&](const Errors& e) { return f.configs ? double(e.within) / f.configs : 0.0; };
  std::printf(
      "{\"bench\": \"plan\", \"models\": \"%s\", \"pick_vs_best\": %.3f, \"within_8pct_share\": "
      "%.3f, \"worst_prediction_error\": %.3f, \"worst_config\": \"%s\", "
      "\"planning_seconds\": %.4f, \"planning_configs_per_second\": %.0f, "
      "\"two_process_worst_error\": %.3f, \"within_8pct_share_overhead_only\": %.3f, "
      "\"worst_prediction_error_overhead_only\": %.3f, \"worst_config_overhead_only\": \"%s\", "
      "\"two_process_worst_error_overhead_only\": %.3f, \"within_8pct_share_proportional\": %.3f, "
      "\"worst_prediction_error_proportional\": %.3f, \"within_8pct_share_one_factor\": %.3f, "
      "\"worst_prediction_error_one_factor\": %.3f, "
      "\"two_process_worst_error_own_calibration\": %.3f, \"repeatable_within_8pct_share\": "
      "%.3f, \"median_round_spread\": %.3f, \"configs\": %d}\n",
      models.c_str(), f.pick_vs_best, share(f.calibrated), f.calibrated.worst,
      f.calibrated.worst_config.c_str(), f.planning_seconds,
      f.configs_per_second < 1e30 ? f.configs_per_second : 0.0, f.two_process_worst,
      share(f.overhead_only), f.overhead_only.worst, f.overhead_only.worst_config.c_str(),
      f.two_process_worst_overhead_only, share(f.proportional), f.proportional.worst,
      share(f.one_factor), f.one_factor.worst, f.two_process_worst_own_calibration,
      f.repeatable_share(), f.median_spread(), f.configs);
}

}  // namespace

int main(int argc, char** argv) {
  if (bench::is_worker(argc, argv)) return bench::worker_main(argc, argv);
  const std::string models = text_option(argc, argv, "--models", "gpt,gpt-large,mlp,mlp-2proc");
  const int steps = std::stoi(text_option(argc, argv, "--steps", "5"));
  const int warmup = std::stoi(text_option(argc, argv, "--warmup", "1"));
  const int rounds = std::max(1, std::stoi(text_option(argc, argv, "--rounds", "3")));
  std::set<std::string> wanted;
  for (size_t at = 0; at <= models.size();) {
    const size_t comma = std::min(models.find(',', at), models.size());
    wanted.insert(models.substr(at, comma - at));
    at = comma + 1;
  }
  if (text_option(argc, argv, "--scaling-check", "no") == "yes") {
    if (wanted.count("gpt")) scaling_check(gpt("gpt", 4, 128));
    if (wanted.count("gpt-large")) scaling_check(gpt("gpt-large", 8, 256));
    if (wanted.count("mlp") || wanted.count("mlp-2proc")) scaling_check(mlp());
    return 0;
  }
  Figures f;
  if (wanted.count("gpt")) run_model(gpt("gpt", 4, 128), steps, warmup, rounds, f);
  if (wanted.count("gpt-large")) run_model(gpt("gpt-large", 8, 256), steps, warmup, rounds, f);
  if (wanted.count("mlp")) run_model(mlp(), steps, warmup, rounds, f);
  if (wanted.count("mlp-2proc")) {
    std::string tp_launch;
    if (!bench::locate_tp_launch(text_option(argc, argv, "--tp-launch", ""), tp_launch)) return 1;
    run_two_processes(tp_launch, steps, warmup, rounds, f);
  }
  print_summary(models, f);
  return 0;
}
