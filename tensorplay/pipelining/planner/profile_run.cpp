// pp::profile (profile_run.h): one traced cut per candidate, each segment timed on its own.
#include "tensorplay/pipelining/planner/profile_run.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <stdexcept>
#include <thread>

#include "tensorplay/core/cpu_threads.h"
#include "tensorplay/core/host_memory.h"
#include "tensorplay/pipelining/build_stage.h"
#include "tensorplay/pipelining/pipeline.h"
#include "tensorplay/tensor.h"
#include "tensorplay/transport/local_channel.h"

namespace tensorplay::pipelining {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double tensor_bytes(const std::vector<Tensor>& tensors) {
  double bytes = 0;
  for (const Tensor& t : tensors)
    bytes += static_cast<double>(t.numel()) * static_cast<double>(element_size(t.dtype()));
  return bytes;
}

double host_bytes() { return static_cast<double>(host_memory_stats().allocated_bytes); }

// The gradients a segment's backward starts from: ones shaped like its outputs.
std::vector<Tensor> output_grads(const std::vector<Tensor>& outputs) {
  std::vector<Tensor> grads;
  for (const Tensor& t : outputs)
    grads.push_back(ones(t.shape(), {.dtype = t.dtype(), .device = t.device()}));
  return grads;
}

struct Timing {
  double forward = std::numeric_limits<double>::infinity();
  double full_backward = forward, input_backward = forward, weight_backward = forward;
  double activation_bytes = 0;
  std::vector<Tensor> outputs;
};

// Starts the backward of one microbatch: the loss on the last stage, gradients elsewhere.
void seed_backward(PipelineStage& stage, int mb, const ProfileOptions& o) {
  if (stage.is_last()) stage.compute_loss(mb, o.target, o.loss_fn);
}

// One round of F, B, then F, I, W on `stage`, keeping the best times.
void time_round(PipelineStage& stage, const std::vector<Tensor>& inputs, const ProfileOptions& o,
                Timing& t) {
  const bool host = !o.device.is_cuda();
  const double before = host_bytes();
  auto start = Clock::now();
  std::vector<Tensor> outputs = stage.forward(0, inputs);
  t.forward = std::min(t.forward, seconds_since(start));
  if (host) t.activation_bytes = std::max(0.0, host_bytes() - before);
  const std::vector<Tensor> grads = stage.is_last() ? std::vector<Tensor>{} : output_grads(outputs);
  seed_backward(stage, 0, o);
  start = Clock::now();
  stage.backward(0, grads);
  t.full_backward = std::min(t.full_backward, seconds_since(start));
  stage.forward(1, inputs);
  seed_backward(stage, 1, o);
  start = Clock::now();
  stage.backward_input(1, grads);
  t.input_backward = std::min(t.input_backward, seconds_since(start));
  start = Clock::now();
  stage.backward_weight(1);
  t.weight_backward = std::min(t.weight_backward, seconds_since(start));
  t.outputs = std::move(outputs);
}

// Bytes still allocated after a forward under full recomputation.
double recompute_bytes(PipelineStage& stage, const std::vector<Tensor>& inputs, bool host) {
  if (!host) return 0;
  stage.set_recompute(RecomputePolicy::full());
  const double before = host_bytes();
  std::vector<Tensor> outputs = stage.forward(0, inputs);
  const double bytes = std::max(0.0, host_bytes() - before);
  outputs.clear();
  stage.clear();
  stage.set_recompute(RecomputePolicy::none());
  return bytes;
}

// The part of an action's time that does not shrink with the microbatch: from the forward at
// one sample and at the profiled size n, t(s) = a + b s gives a = (n t(1) - t(n)) / (n - 1).
double overhead(PipelineStage& stage, const std::vector<Tensor>& inputs, const ProfileOptions& o,
                double forward) {
  const int64_t n = inputs.empty() || inputs[0].dim() == 0 ? 1 : inputs[0].shape()[0];
  if (n < 2) return 0.0;
  std::vector<Tensor> one;
  for (const Tensor& t : inputs) one.push_back(t.dim() > 0 ? t.slice0(0, 1) : t);
  double best = std::numeric_limits<double>::infinity();
  for (int r = 0; r <= std::max(1, o.repeats); ++r) {  // the first run warms up
    const auto start = Clock::now();
    std::vector<Tensor> outputs = stage.forward(2, one);
    const double seconds = seconds_since(start);
    stage.clear();
    if (r > 0) best = std::min(best, seconds);
  }
  return std::clamp((static_cast<double>(n) * best - forward) / static_cast<double>(n - 1), 0.0,
                    forward);
}

// One optimizer step over the stage's parameters (their gradients are there from the backward).
double optimizer_seconds(PipelineStage& stage, const ProfileOptions& o) {
  std::vector<Tensor> params;
  for (const auto& [name, p] : stage.module().named_parameters())
    if (p.requires_grad()) params.push_back(p);
  if (params.empty()) return 0.0;
  std::unique_ptr<optim::Optimizer> opt =
      o.optimizer ? o.optimizer(params)
                  : std::make_unique<optim::AdamW>(params, optim::AdamWOptions{.lr = 0.0f});
  double best = std::numeric_limits<double>::infinity();
  for (int r = 0; r <= std::max(1, o.repeats); ++r) {  // the first step builds the state
    const auto start = Clock::now();
    opt->step();
    if (r > 0) best = std::min(best, seconds_since(start));
  }
  opt->zero_grad();
  return best;
}

SegmentProfile measure_segment(PipelineStage& stage, std::vector<Tensor>& inputs,
                               const ProfileOptions& o) {
  Timing warm;
  time_round(stage, inputs, o, warm);  // first calls build kernels and fill caches: not counted
  Timing t;
  for (int r = 0; r < std::max(1, o.repeats); ++r) time_round(stage, inputs, o, t);
  SegmentProfile s;
  s.forward = t.forward;
  s.full_backward = t.full_backward;
  s.input_backward = t.input_backward;
  s.weight_backward = t.weight_backward;
  s.activation_bytes = t.activation_bytes;
  s.activation_bytes_recompute = recompute_bytes(stage, inputs, !o.device.is_cuda());
  for (const auto& [name, p] : stage.module().named_parameters()) {
    const double bytes = tensor_bytes({p});
    s.parameter_bytes += bytes;
    if (p.requires_grad()) s.gradient_bytes += bytes;
  }
  s.optimizer_bytes = s.gradient_bytes * o.optimizer_states_per_parameter;
  s.output_bytes = stage.is_last() ? 0.0 : tensor_bytes(t.outputs);
  s.overhead = overhead(stage, inputs, o, t.forward);
  s.optimizer_seconds = optimizer_seconds(stage, o);
  inputs.clear();
  for (const Tensor& out : t.outputs) inputs.push_back(out.detach());
  return s;
}

// The in-process channel: a send and its receive hand the tensor over without a copy, so the
// latency is the hand-over's and the bandwidth unbounded.
ChannelProfile in_process_channel() {
  transport::LocalChannel channel;
  Tensor t = zeros({16});
  double best = std::numeric_limits<double>::infinity();
  for (uint64_t k = 0; k < 64; ++k) {
    const transport::TransferKey key{.stream = 1, .key = k};
    const auto start = Clock::now();
    auto descriptors = channel.send(0, key, {t});
    channel.post_receive(0, key, descriptors, cpu(), std::chrono::milliseconds(1000),
                         [](std::vector<Tensor>, std::string) {});
    best = std::min(best, seconds_since(start));
  }
  return {"in_process", best, 0.0};
}

// Whole-model F + B time with each thread count, as speedups over the first.
std::vector<ThreadScaling> thread_scaling(std::vector<std::shared_ptr<PipelineStage>>& stages,
                                          const std::vector<Tensor>& example,
                                          const ProfileOptions& o) {
  std::vector<ThreadScaling> scaling;
  double first = 0;
  for (int n : o.thread_counts) {
    double time = 0;
    std::thread([&] {
      set_num_threads(n);
      ProfileOptions once = o;
      once.repeats = std::max(1, o.repeats);
      std::vector<Tensor> inputs = example;  // stage 0's inputs (flattened by the caller)
      for (auto& stage : stages) time += measure_segment(*stage, inputs, once).forward;
    }).join();
    if (scaling.empty()) first = time;
    scaling.push_back({n, time > 0 ? first / time : 1.0});
  }
  return scaling;
}

// Each segment's F, B, I and W at `multiple` times the example microbatch (each input and the
// target repeated along dim 0), traced and cut as profile() cuts the model, added to the
// segments' larger sizes. The model's gradients are left zero.
void time_larger(nn::Module& model, const std::vector<Tensor>& example, const ProfileOptions& o,
                 int multiple, Profile& p) {
  std::vector<Tensor> larger;
  for (const Tensor& t : example) larger.push_back(cat(std::vector<Tensor>(multiple, t), 0));
  PipelineOptions cut;
  for (const std::string& name : o.candidates) cut.split_spec[name] = SplitPoint::Beginning;
  Pipe pipe = pipeline(model, larger, cut);
  auto stages = build_stages(pipe, {o.device});
  ProfileOptions big = o;
  big.target = cat(std::vector<Tensor>(multiple, o.target), 0);
  std::vector<Tensor> inputs = pipe.flatten_inputs(larger, {});
  for (size_t s = 0; s < stages.size() && s < p.segments.size(); ++s) {
    for (Tensor& t : inputs) t = t.to(o.device);
    Timing warm, t;
    time_round(*stages[s], inputs, big, warm);  // not counted, as measure_segment
    for (int r = 0; r < std::max(1, o.repeats); ++r) time_round(*stages[s], inputs, big, t);
    p.segments[s].larger.push_back({p.microbatch_size * multiple, t.forward, t.input_backward,
                                    t.weight_backward, t.full_backward});
    inputs.clear();
    for (const Tensor& out : t.outputs) inputs.push_back(out.detach());
  }
  optim::SGD(parameters(stages), {.lr = 0.0f}).zero_grad();
}

// Checks ProfileOptions::larger_microbatches: ascending multiples of at least 2.
void check_multiples(const std::vector<int>& multiples) {
  int below = 1;
  for (int k : multiples) {
    if (k <= below)
      throw std::invalid_argument(
          "profile: larger_microbatches must ascend from 2 (multiples of "
          "the example microbatch), got " +
          std::to_string(k) + " after " + std::to_string(below));
    below = k;
  }
}

}  // namespace

Profile profile(nn::Module& model, const std::vector<Tensor>& example_microbatch,
                const ProfileOptions& o) {
  if (o.candidates.empty())
    throw std::invalid_argument(
        "profile: no split candidates (name the modules a stage may "
        "begin at, e.g. blocks.0 ... blocks.N)");
  if (!o.loss_fn || !o.target.defined())
    throw std::invalid_argument("profile: needs the loss function and one microbatch's target");
  check_multiples(o.larger_microbatches);
  PipelineOptions cut;
  for (const std::string& name : o.candidates) cut.split_spec[name] = SplitPoint::Beginning;
  Pipe pipe = pipeline(model, example_microbatch, cut);
  auto stages = build_stages(pipe, {o.device});
  Profile p;
  p.model = o.model_name;
  p.device = o.device.is_cuda() ? "cuda" : "cpu";
  p.microbatch_size = example_microbatch.at(0).shape().at(0);
  p.cores = std::max(1u, std::thread::hardware_concurrency());
  p.activation_bytes_source = o.device.is_cuda() ? "not measured on CUDA (0)"
                                                 : "host allocator: bytes live after the forward";
  if (stages.size() != o.candidates.size() + 1)
    throw std::invalid_argument(
        "profile: " + std::to_string(o.candidates.size()) + " candidates cut " + o.model_name +
        " into " + std::to_string(stages.size()) + " segments, not " +
        std::to_string(o.candidates.size() + 1) +
        " (a candidate at the very beginning, or pipe_split() calls in the model?)");
  std::vector<Tensor> inputs = pipe.flatten_inputs(example_microbatch, {});
  // On a thread of one product thread: the times the planner scales by Profile::threads, and
  // free of the waits of a product's threads for a core another process holds.
  std::thread([&] {
    set_num_threads(1);
    for (size_t s = 0; s < stages.size(); ++s) {
      for (Tensor& t : inputs) t = t.to(o.device);
      SegmentProfile seg = measure_segment(*stages[s], inputs, o);
      seg.name = s == 0 ? "" : o.candidates[s - 1];
      p.segments.push_back(seg);
    }
    for (int k : o.larger_microbatches) time_larger(model, example_microbatch, o, k, p);
  }).join();
  p.channels.push_back(in_process_channel());
  for (ChannelProfile& c : measure_ucx_channels(o.ucx_channels, o.ping_pong))
    p.channels.push_back(std::move(c));
  if (o.thread_counts.size() > 1)
    p.threads = thread_scaling(stages, pipe.flatten_inputs(example_microbatch, {}), o);
  return p;
}

}  // namespace tensorplay::pipelining
