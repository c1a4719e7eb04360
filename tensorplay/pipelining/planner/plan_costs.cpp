// The planner's model of one configuration (detail/plan_costs.h).
#include "tensorplay/pipelining/planner/detail/plan_costs.h"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <stdexcept>

#include "tensorplay/core/cpu_threads.h"

namespace tensorplay::pipelining::detail {
namespace {

// Segments [begin of stage s, begin of stage s + 1).
int stage_end(const PlanChoice& c, int s, int segments) {
  return s + 1 < static_cast<int>(c.stage_begin.size()) ? c.stage_begin[s + 1] : segments;
}

// Samples per microbatch over the profiled microbatch: times and activations scale with it.
double size_scale(const Profile& profile, const PlanContext& context, const PlanChoice& c) {
  return static_cast<double>(context.batch) / c.n_microbatches /
         static_cast<double>(profile.microbatch_size);
}

// Compute speed of one stage actor with `threads` product threads, on microbatches of
// `samples`, while every rank of the host computes with as many: the profile's speedup, less
// when the host's cores are oversubscribed, and less by the compute factor calibrated for that
// microbatch when the host runs more than one rank.
double compute_speed(const Profile& profile, const PlanContext& context, int threads,
                     double samples) {
  const double wanted = static_cast<double>(threads) * context.ranks_per_host;
  const double oversubscribed = std::max(1.0, wanted / std::max(1, context.cores));
  const double shared = context.ranks_per_host > 1 ? profile.compute_factor_at(samples) : 1.0;
  // One thread per actor, more actors than cores: they take turns.
  return profile.speedup(threads) / oversubscribed / shared;
}

}  // namespace

PlanContext make_context(const Profile& profile, const PlanRequest& request) {
  profile.check();
  if (request.world < 1)
    throw std::invalid_argument("plan: world must be at least 1 rank, got " +
                                std::to_string(request.world));
  if (request.batch < 1)
    throw std::invalid_argument("plan: batch must be at least 1 sample, got " +
                                std::to_string(request.batch));
  if (request.memory_cap < 0)
    throw std::invalid_argument("plan: the memory cap must be >= 0 bytes (0: none)");
  PlanContext c;
  c.batch = request.batch;
  c.memory_cap = request.memory_cap;
  c.channel = plan_channel(profile, request);
  c.cores = request.cores > 0 ? request.cores : std::max(1, profile.cores);
  c.ranks_per_host = request.ranks_per_host > 0 ? request.ranks_per_host : request.world;
  c.one_process = request.one_process;
  const int share = thread_share(c.cores, c.ranks_per_host, 1);
  for (int t = 1; t < share && request.try_threads; t *= 2) c.thread_options.push_back(t);
  c.thread_options.push_back(share);
  return c;
}

void check_choice(const Profile& profile, const PlanChoice& c) {
  const int segments = static_cast<int>(profile.segments.size());
  if (static_cast<int>(c.stage_begin.size()) != c.num_stages())
    throw std::invalid_argument("plan: " + std::to_string(c.num_stages()) + " stages but " +
                                std::to_string(c.stage_begin.size()) + " stage beginnings");
  for (int s = 0; s < c.num_stages(); ++s) {
    const int begin = c.stage_begin[s], end = stage_end(c, s, segments);
    if ((s == 0 && begin != 0) || begin >= end || end > segments)
      throw std::invalid_argument("plan: stage " + std::to_string(s) +
                                  " covers no segments or runs past the profile's " +
                                  std::to_string(segments));
  }
  if (static_cast<int>(c.recompute.size()) != c.num_stages())
    throw std::invalid_argument("plan: recompute needs one entry per stage");
}

std::vector<double> segment_costs(const Profile& profile) {
  std::vector<double> costs;
  for (const SegmentProfile& s : profile.segments) costs.push_back(s.forward + s.full_backward);
  return costs;
}

std::vector<int> even_stage_begins(int segments, int stages) {
  std::vector<int> begins;
  for (int s = 0; s < stages; ++s)
    begins.push_back(static_cast<int>(static_cast<int64_t>(s) * segments / stages));
  return begins;
}

// A segment's time of one action kind at `samples` per microbatch (`profiled`: the profile's
// microbatch): piecewise linear through (0, its overhead), (profiled, its time) and its larger
// sizes, continued along the last piece. Without larger sizes: the overhead stays, the rest
// scales with the samples.
double time_at(const SegmentProfile& seg, double profiled, double samples,
               double SegmentProfile::*own, double SizedTimes::*larger) {
  const double t = seg.*own;
  double x0 = 0, y0 = std::min(t, seg.overhead), x1 = profiled, y1 = t;
  for (const SizedTimes& point : seg.larger) {
    if (samples <= x1) break;
    x0 = x1, y0 = y1;
    x1 = static_cast<double>(point.samples), y1 = point.*larger;
  }
  return std::max(0.0, y0 + (y1 - y0) * (samples - x0) / (x1 - x0));
}

schedules::CostModel cost_model(const Profile& profile, const PlanContext& context,
                                const PlanChoice& c) {
  const int segments = static_cast<int>(profile.segments.size());
  const bool split = schedules::uses_split_backward(c.schedule);
  const double byte_scale = size_scale(profile, context, c);
  const double profiled = static_cast<double>(profile.microbatch_size);
  const double samples = byte_scale * profiled;
  const double speed = compute_speed(profile, context, c.threads, samples);
  schedules::CostModel m;
  m.forward.assign(c.num_stages(), 0.0);
  m.input_backward.assign(c.num_stages(), 0.0);
  m.weight_backward.assign(c.num_stages(), 0.0);
  m.boundary_bytes.assign(c.num_stages(), 0.0);
  const bool any_recompute =
      std::find(c.recompute.begin(), c.recompute.end(), true) != c.recompute.end();
  if (any_recompute) {
    m.recompute_ahead.assign(c.num_stages(), 0.0);
    m.recompute.assign(c.num_stages(), 0.0);
  }
  for (int s = 0; s < c.num_stages(); ++s) {
    const int end = stage_end(c, s, segments);
    for (int i = c.stage_begin[s]; i < end; ++i) {
      const SegmentProfile& seg = profile.segments[i];
      auto time = [&](double SegmentProfile::*own, double SizedTimes::*larger) {
        return time_at(seg, profiled, samples, own, larger) / speed;
      };
      const double forward = time(&SegmentProfile::forward, &SizedTimes::forward);
      const double weight =
          split ? time(&SegmentProfile::weight_backward, &SizedTimes::weight_backward) : 0.0;
      m.forward[s] += forward;
      m.input_backward[s] +=
          split ? time(&SegmentProfile::input_backward, &SizedTimes::input_backward)
                : time(&SegmentProfile::full_backward, &SizedTimes::full_backward);
      if (c.recompute[s]) {
        // The forward again, in I (or B), unless the F ran right before it and kept the
        // activations; a recomputing stage computes its weight gradients in I too, and its W
        // only adds them up. A waiting rank rebuilds the last segment ahead: the recomputation
        // the backward meets first.
        m.input_backward[s] += forward + weight;
        m.recompute[s] += forward;
        if (i == end - 1) m.recompute_ahead[s] = forward;
      } else {
        m.weight_backward[s] += weight;
      }
    }
    if (s == 0 && split && !c.recompute[s]) {
      // The first stage's inputs are data, with no gradient to compute: its I has nothing to do
      // (the runtime's backward_input finds no input needing one), and its W computes the whole
      // backward. Recomputing, its I computes it all already (above).
      m.weight_backward[s] += m.input_backward[s];
      m.input_backward[s] = 0;
    }
    m.forward[s] += profile.action_overhead;  // the runtime's share of each action
    m.input_backward[s] += profile.action_overhead;
    if (split) m.weight_backward[s] += profile.action_overhead;
    m.boundary_bytes[s] = profile.segments[end - 1].output_bytes * byte_scale;
  }
  m.latency = context.channel.latency;
  m.bandwidth = context.channel.bandwidth;
  m.memory = memory_costs(profile, context, c);
  return m;
}

double transfer_share(const schedules::CostModel& costs, const std::vector<int>& stage_to_rank) {
  double transfers = 0, compute = 0;
  const int stages = static_cast<int>(stage_to_rank.size());
  for (int s = 0; s < stages; ++s) {
    compute += costs.forward[s] + costs.input_backward[s] + costs.weight_backward[s];
    if (s + 1 < stages && stage_to_rank[s] != stage_to_rank[s + 1])
      transfers += 2 * costs.transfer_time(s);  // the activation, then its gradient
  }
  return compute > 0 ? transfers / compute : 0.0;
}

schedules::MemoryCosts memory_costs(const Profile& profile, const PlanContext& context,
                                    const PlanChoice& c) {
  const int segments = static_cast<int>(profile.segments.size());
  const double scale = size_scale(profile, context, c);
  const size_t stages = static_cast<size_t>(c.num_stages());
  schedules::MemoryCosts m;
  m.activation_bytes.assign(stages, 0.0);
  m.recompute_activation_bytes.assign(stages, 0.0);
  m.fixed_bytes.assign(stages, 0.0);
  m.recompute.assign(stages, 0);
  for (int s = 0; s < c.num_stages(); ++s) {
    for (int i = c.stage_begin[s]; i < stage_end(c, s, segments); ++i) {
      const SegmentProfile& seg = profile.segments[i];
      m.activation_bytes[s] += seg.activation_bytes * scale;
      m.recompute_activation_bytes[s] += seg.activation_bytes_recompute * scale;
      m.fixed_bytes[s] += seg.parameter_bytes + seg.gradient_bytes + seg.optimizer_bytes;
    }
    m.recompute[s] = c.recompute[s] ? 1 : 0;
  }
  // What I keeps for W: everything F kept (the split backward's graph holds it until W).
  m.weight_stash_bytes = m.kept_per_stage(c.num_stages());
  return m;
}

double optimizer_seconds(const Profile& profile, const PlanContext& context, const PlanChoice& c,
                         const std::vector<int>& stage_to_rank) {
  const int segments = static_cast<int>(profile.segments.size());
  std::vector<double> per_rank(c.ranks, 0.0);
  for (int s = 0; s < c.num_stages(); ++s)
    for (int i = c.stage_begin[s]; i < stage_end(c, s, segments); ++i)
      per_rank[stage_to_rank[s]] += profile.segments[i].optimizer_seconds;
  if (context.one_process) return std::accumulate(per_rank.begin(), per_rank.end(), 0.0);
  return *std::max_element(per_rank.begin(), per_rank.end());
}

std::string why_slower(const PlanChoice& c, const PlanChoice& best) {
  char text[160];
  const double slower = best.step_seconds > 0 ? c.step_seconds / best.step_seconds - 1 : 0;
  if (c.bubble > best.bubble + 0.01)
    std::snprintf(text, sizeof text, "+%.1f%% step: bubble %.1f%% vs %.1f%%", 100 * slower,
                  100 * c.bubble, 100 * best.bubble);
  else if (c.transfer_share > best.transfer_share + 0.01)
    std::snprintf(text, sizeof text, "+%.1f%% step: communication %.1f%% of compute vs %.1f%%",
                  100 * slower, 100 * c.transfer_share, 100 * best.transfer_share);
  else
    std::snprintf(text, sizeof text, "+%.1f%% step: compute (cut, threads or recomputation)",
                  100 * slower);
  return text;
}

}  // namespace tensorplay::pipelining::detail

namespace tensorplay::pipelining {

ChannelProfile plan_channel(const Profile& profile, const PlanRequest& request) {
  if (!request.channel.empty()) return profile.channel(request.channel);
  auto find = [&](const std::string& kind) -> const ChannelProfile* {
    for (const ChannelProfile& c : profile.channels)
      if (c.kind == kind) return &c;
    return nullptr;
  };
  const bool one_host = request.ranks_per_host <= 0 || request.ranks_per_host >= request.world;
  std::vector<std::string> wanted = {"in_process"};
  if (!request.one_process)
    wanted = one_host ? std::vector<std::string>{"ucx_shm", "ucx_tcp"}
                      : std::vector<std::string>{"ucx_tcp", "ucx_shm"};
  for (const std::string& kind : wanted)
    if (const ChannelProfile* c = find(kind)) return *c;
  return profile.channels.empty() ? ChannelProfile{} : profile.channels.front();
}

}  // namespace tensorplay::pipelining
