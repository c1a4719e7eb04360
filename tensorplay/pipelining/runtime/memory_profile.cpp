// profile_stage_memory: each action of one microbatch runs in a scope of a private account whose
// peak is reset at the action's start, so held and transient bytes read off directly.
#include "tensorplay/pipelining/runtime/memory_profile.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "tensorplay/core/memory_accounting.h"
#include "tensorplay/core/tensor_memory.h"

namespace tensorplay::pipelining {
namespace {

std::vector<Tensor> zeros_of(const std::vector<TensorMeta>& metas, Device device) {
  std::vector<Tensor> out;
  for (const TensorMeta& m : metas)
    out.push_back(zeros(m.shape, {.dtype = m.dtype, .device = device}));
  return out;
}

// Activation bytes held now, and the most held during the action since `start`.
struct Meter {
  MemoryAccount& account;
  int64_t held() const { return account.current(MemoryKind::Activation); }
  // Starts an action: returns the bytes held at its start.
  int64_t start() {
    account.reset_peaks();
    return held();
  }
  int64_t transient(int64_t at_start) const {
    return std::max<int64_t>(0, account.peak(MemoryKind::Activation) - std::max(at_start, held()));
  }
};

void check_profilable(const PipelineStage& stage, const MemoryProfileOptions& options) {
  if (stage.stashed_microbatches() != 0)
    throw std::logic_error("profile_stage_memory: stage " + std::to_string(stage.stage_index()) +
                           " holds " + std::to_string(stage.stashed_microbatches()) +
                           " microbatch(es); profile it between steps");
  if (stage.is_last() && (!options.loss_fn || !options.target.defined()))
    throw std::invalid_argument(
        "profile_stage_memory: the last stage needs the loss function and one microbatch's "
        "target (MemoryProfileOptions) to run its backward");
}

// What the neighbours send for one F and its backward, made outside the account (as in
// profile_stage_memory).
struct Neighbours {
  std::vector<Tensor> inputs, grads;
};

Neighbours neighbours_of(const PipelineStage& stage) {
  Neighbours n{zeros_of(stage.input_meta(), stage.device()), {}};
  if (!stage.is_last()) n.grads = zeros_of(stage.output_meta(), stage.device());
  return n;
}

// A stage of one recomputed segment keeps its activations for a backward right after its F: that
// F's kept bytes, then its I's (and what it keeps for W, as a plain stage's I) and, on a second
// such F, its B's transient bytes. `sent` holds each pass's inputs and output gradients.
void profile_kept(PipelineStage& stage, const MemoryProfileOptions& options, Meter& meter,
                  std::vector<Neighbours> sent, StageMemoryProfile& out) {
  for (bool split : {true, false}) {
    std::vector<Tensor> inputs = std::move(sent[split ? 0 : 1].inputs);
    std::vector<Tensor> grads = std::move(sent[split ? 0 : 1].grads);
    int64_t at = meter.start();
    const int64_t base = at;
    if (!stage.is_first()) adopt_memory(inputs);
    std::vector<Tensor> outputs = stage.forward(0, inputs, {}, /*keep_activations=*/true);
    if (stage.is_last()) stage.compute_loss(0, options.target.to(stage.device()), options.loss_fn);
    if (split) out.kept_forward_transient_bytes = meter.transient(at);  // outputs still held
    if (!stage.is_last()) outputs.clear();  // the last stage's are retained, counted apart
    inputs.clear();
    if (split) out.kept_activation_bytes = meter.held() - at - out.retained_bytes;
    outputs.clear();
    if (options.across_processes) adopt_memory(grads);
    at = meter.start();
    if (split) {
      stage.backward_input(0, std::exchange(grads, {}));
      out.kept_input_transient_bytes = meter.transient(at);
      out.kept_weight_stash_bytes = std::max<int64_t>(0, meter.held() - base);
      at = meter.start();
      stage.backward_weight(0);
      out.kept_weight_transient_bytes = meter.transient(at);
    } else {
      stage.backward(0, std::exchange(grads, {}));
      out.kept_full_backward_transient_bytes = meter.transient(at);
    }
  }
}

// F on `inputs`: the bytes it keeps, retains (last stage) or sends on, and its workspace. The
// stage holds the activations after it.
void profile_forward(PipelineStage& stage, const MemoryProfileOptions& options, Meter& meter,
                     std::vector<Tensor> inputs, StageMemoryProfile& out) {
  const int64_t at = meter.start();
  if (!stage.is_first()) adopt_memory(inputs);
  std::vector<Tensor> outputs = stage.forward(0, inputs);
  if (stage.is_last()) {
    stage.compute_loss(0, options.target.to(stage.device()), options.loss_fn);
    for (const Tensor& t : outputs) {
      const auto bytes = static_cast<int64_t>(t.nbytes());
      out.retained_bytes += bytes;
      // Also held by the graph (a loss that saved its logits): freed by the backward only.
      if (t.defined() && t.impl().storage.use_count() > 1) out.retained_kept_bytes += bytes;
    }
  } else {
    // Sent on: the next stage's once it takes them, unless the stage's own graph holds them too
    // (then they stay in its activation bytes).
    for (const Tensor& t : outputs)
      if (t.defined() && t.impl().storage.use_count() == 1)
        out.sent_bytes += static_cast<int64_t>(t.nbytes());
  }
  // F's own workspace: its peak over what it holds at its end, its outputs still there (the
  // model takes the sent bytes at F apart).
  out.forward_transient_bytes = meter.transient(at);
  if (!stage.is_last()) outputs.clear();
  inputs.clear();
  out.activation_bytes = meter.held() - at - out.retained_bytes;
}

// I then W on the forward just profiled: their workspaces and the stash I leaves for W.
void profile_split_backward(PipelineStage& stage, Meter& meter, std::vector<Tensor> grads,
                            bool copies, StageMemoryProfile& out) {
  int64_t at = meter.start();
  if (copies) adopt_memory(grads);
  stage.backward_input(0, std::move(grads));  // the input gradients are sent back
  out.input_transient_bytes = meter.transient(at);
  out.weight_stash_bytes = std::max<int64_t>(
      0, meter.held() - (at - out.activation_bytes - out.retained_bytes) - out.retained_bytes);
  at = meter.start();
  stage.backward_weight(0);
  out.weight_transient_bytes = meter.transient(at);
}

// The full backward B (I and W at once, as 1F1B and GPipe run it) on a second forward.
void profile_full_backward(PipelineStage& stage, const MemoryProfileOptions& options, Meter& meter,
                           bool copies, StageMemoryProfile& out) {
  std::vector<Tensor> again = zeros_of(stage.input_meta(), stage.device());
  if (!stage.is_first()) adopt_memory(again);
  std::vector<Tensor> outputs_again = stage.forward(0, again);
  if (stage.is_last()) stage.compute_loss(0, options.target.to(stage.device()), options.loss_fn);
  outputs_again.clear();
  again.clear();
  std::vector<Tensor> grads_again;
  if (!stage.is_last()) grads_again = zeros_of(stage.output_meta(), stage.device());
  if (copies) adopt_memory(grads_again);
  const int64_t at = meter.start();
  stage.backward(0, std::move(grads_again));
  out.full_backward_transient_bytes = meter.transient(at);
}

}  // namespace

StageMemoryProfile profile_stage_memory(PipelineStage& stage, const MemoryProfileOptions& options) {
  check_profilable(stage, options);
  std::vector<Tensor> params = stage.module().parameters();
  std::vector<Tensor> saved_grads;
  for (const Tensor& p : params) saved_grads.push_back(p.grad());
  // What the neighbours send, made outside the account. The inputs are the stage's: a copy
  // received from another process, or, within one, a tensor its maker let go of (a stage keeps
  // only its outputs' history). Output gradients are the stage's only as copies (within a process
  // they stay charged to the stage that made them), as the runtime does.
  std::vector<Tensor> inputs = zeros_of(stage.input_meta(), stage.device());
  std::vector<Tensor> grads;
  if (!stage.is_last()) grads = zeros_of(stage.output_meta(), stage.device());
  const bool copies = options.across_processes;
  std::vector<Neighbours> kept_sent;  // for profile_kept
  if (stage.recomputes() && stage.recomputed_modules().size() == 1)
    kept_sent = {neighbours_of(stage), neighbours_of(stage)};
  auto account = std::make_shared<MemoryAccount>();
  StageMemoryProfile out;
  out.stage = stage.stage_index();
  {
    MemoryScope scope(account);
    Meter meter{*account};
    profile_forward(stage, options, meter, std::move(inputs), out);
    profile_split_backward(stage, meter, std::move(grads), copies, out);
    profile_full_backward(stage, options, meter, copies, out);
    out.transient_bytes = std::max({out.forward_transient_bytes, out.input_transient_bytes,
                                    out.weight_transient_bytes, out.full_backward_transient_bytes});
    if (stage.recomputes())
      out.recomputed_segments = static_cast<int>(stage.recomputed_modules().size());
    if (out.recomputed_segments == 1)
      profile_kept(stage, options, meter, std::move(kept_sent), out);
  }
  stage.clear();
  for (size_t i = 0; i < params.size(); ++i) params[i].set_grad(saved_grads[i]);
  for (const Tensor& p : params) out.parameter_bytes += static_cast<int64_t>(p.nbytes());
  for (const auto& [name, b] : stage.module().named_buffers())
    out.parameter_bytes += static_cast<int64_t>(b.nbytes());
  return out;
}

namespace {

// A recomputing stage's profile measured the recomputing figures: they become the recompute_*
// costs, and the plain ones those of an F that keeps its activations (one segment only).
// A stage without recomputation gets the defaults (nothing kept under recomputation, a rebuild of
// every activation).
void add_recompute_costs(const StageMemoryProfile& p, schedules::MemoryCosts& costs) {
  const bool recomputes = p.recomputed_segments > 0;
  costs.recompute.push_back(recomputes ? 1 : 0);
  costs.keep_before_backward.push_back(p.recomputed_segments <= 1 ? 1 : 0);
  const auto bytes = [](int64_t b) { return static_cast<double>(b); };
  if (!recomputes) {
    costs.recompute_activation_bytes.push_back(0.0);
    costs.recompute_weight_stash_bytes.push_back(bytes(p.weight_stash_bytes));
    costs.recompute_forward_transient_bytes.push_back(bytes(p.forward_transient_bytes));
    costs.recompute_input_transient_bytes.push_back(bytes(p.input_transient_bytes) +
                                                    bytes(p.activation_bytes));
    costs.recompute_full_backward_transient_bytes.push_back(bytes(p.full_backward_transient_bytes) +
                                                            bytes(p.activation_bytes));
    return;
  }
  costs.recompute_activation_bytes.push_back(bytes(p.activation_bytes));
  costs.recompute_forward_transient_bytes.push_back(bytes(p.forward_transient_bytes));
  costs.recompute_input_transient_bytes.push_back(bytes(p.input_transient_bytes));
  costs.recompute_full_backward_transient_bytes.push_back(bytes(p.full_backward_transient_bytes));
  costs.recompute_weight_stash_bytes.push_back(bytes(p.weight_stash_bytes));
  if (p.recomputed_segments != 1) return;
  // An I after an F that kept its activations runs as a plain stage's: its stash for W, and that
  // W's workspace (the larger of the two W: one figure per stage).
  costs.weight_stash_bytes.back() = bytes(p.kept_weight_stash_bytes);
  costs.weight_transient_bytes.back() =
      std::max(bytes(p.weight_transient_bytes), bytes(p.kept_weight_transient_bytes));
  costs.forward_transient_bytes.back() = static_cast<double>(p.kept_forward_transient_bytes);
  costs.activation_bytes.back() = static_cast<double>(p.kept_activation_bytes);
  costs.input_transient_bytes.back() = static_cast<double>(p.kept_input_transient_bytes);
  costs.full_backward_transient_bytes.back() =
      static_cast<double>(p.kept_full_backward_transient_bytes);
}

// Steps that return no outputs: the stage retains nothing past its backward, and the outputs its
// graph holds anyway are activations of every kind of F (plain, recomputing, keeping).
void drop_retained(const StageMemoryProfile& p, schedules::MemoryCosts& costs) {
  costs.retained_bytes.back() = 0;
  const auto kept = static_cast<double>(p.retained_kept_bytes);
  costs.activation_bytes.back() += kept;
  if (p.recomputed_segments > 0) costs.recompute_activation_bytes.back() += kept;
}

}  // namespace

schedules::MemoryCosts memory_costs_from(const std::vector<StageMemoryProfile>& profiles,
                                         double optimizer_state_factor, bool outputs_returned) {
  if (profiles.empty()) throw std::invalid_argument("memory_costs_from: no stage profiles");
  schedules::MemoryCosts costs;
  costs.activation_bytes.clear();
  costs.weight_stash_bytes.clear();
  costs.transient_bytes.clear();
  costs.forward_transient_bytes.clear();
  costs.input_transient_bytes.clear();
  costs.weight_transient_bytes.clear();
  costs.full_backward_transient_bytes.clear();
  costs.retained_bytes.clear();
  costs.sent_bytes.clear();
  costs.fixed_bytes.clear();
  costs.recompute.clear();
  costs.recompute_activation_bytes.clear();
  for (size_t s = 0; s < profiles.size(); ++s) {
    const StageMemoryProfile& p = profiles[s];
    if (p.stage != static_cast<int>(s))
      throw std::invalid_argument("memory_costs_from: profile " + std::to_string(s) +
                                  " is of stage " + std::to_string(p.stage) +
                                  "; give one profile per stage, in stage order");
    costs.activation_bytes.push_back(static_cast<double>(p.activation_bytes));
    costs.weight_stash_bytes.push_back(static_cast<double>(p.weight_stash_bytes));
    costs.transient_bytes.push_back(static_cast<double>(p.transient_bytes));
    costs.forward_transient_bytes.push_back(static_cast<double>(p.forward_transient_bytes));
    costs.input_transient_bytes.push_back(static_cast<double>(p.input_transient_bytes));
    costs.weight_transient_bytes.push_back(static_cast<double>(p.weight_transient_bytes));
    costs.full_backward_transient_bytes.push_back(
        static_cast<double>(p.full_backward_transient_bytes));
    costs.retained_bytes.push_back(static_cast<double>(p.retained_bytes));
    costs.sent_bytes.push_back(static_cast<double>(p.sent_bytes));
    costs.fixed_bytes.push_back(static_cast<double>(p.parameter_bytes) *
                                (2.0 + optimizer_state_factor));
    add_recompute_costs(p, costs);
    if (!outputs_returned) drop_retained(p, costs);
  }
  return costs;
}

}  // namespace tensorplay::pipelining
