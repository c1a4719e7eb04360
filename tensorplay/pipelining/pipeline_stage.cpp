// PipelineStage: forward/backward per microbatch with activations stashed between them.
#include "tensorplay/pipelining/pipeline_stage.h"

#include <algorithm>
#include <optional>
#include <stdexcept>

#include "tensorplay/core/autograd/checkpoint.h"
#include "tensorplay/core/autograd/grad_mode.h"
#include "tensorplay/core/cpu_threads.h"
#include "tensorplay/core/storage.h"
#include "tensorplay/pipelining/stage_module.h"

namespace tensorplay::pipelining {

namespace {
std::string stage_name(int index) { return "stage " + std::to_string(index); }
}  // namespace

namespace {
void check_stage(const std::shared_ptr<nn::Module>& module, int stage_index, int num_stages) {
  if (!module) throw std::invalid_argument("PipelineStage: the submodule is null");
  if (num_stages < 1 || stage_index < 0 || stage_index >= num_stages)
    throw std::invalid_argument("PipelineStage: stage_index " + std::to_string(stage_index) +
                                " is out of range for " + std::to_string(num_stages) + " stages");
}
}  // namespace

namespace {
// Whether a recomputing stage computes the weight gradients of a microbatch whose F kept its
// activations within that I's pass, as it does for a rebuilt one, rather than as a plain stage
// (its weight work waiting in the stash for W). The pass holds one weight's gradient at a time on
// top of the activations; a plain I keeps, through the pass and until W, what W needs: at least
// each weight's input, the stage's input among them. Where the largest weight outweighs the
// stage's input (wide blocks, few rows) the pass can hold more than the stage without
// recomputation, so the stage runs a plain I there.
bool weight_grads_in_pass(const std::vector<Tensor>& parameters,
                          const std::vector<TensorMeta>& inputs) {
  size_t largest = 0, input = 0;
  for (const Tensor& p : parameters) largest = std::max(largest, p.nbytes());
  for (const TensorMeta& m : inputs) {
    size_t n = element_size(m.dtype);
    for (int64_t d : m.shape) n *= static_cast<size_t>(d);
    input += n;
  }
  return largest <= input;
}

// `out`'s history without its values: a tensor of its shape and dtype with its grad_fn and no
// bytes, what the backward needs of an output it seeds with the output's gradient. A leaf (an
// output that is a parameter or an input passed on) stays as it is: its gradient lands on it.
Tensor history_of(const Tensor& out) {
  if (!out.defined() || !out.grad_fn()) return out;
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(0, out.device());
  impl->shape = out.shape();
  impl->dtype = out.dtype();
  impl->requires_grad = out.requires_grad();
  impl->grad_fn = out.grad_fn();
  return Tensor(std::move(impl));
}
}  // namespace

PipelineStage::PipelineStage(std::shared_ptr<nn::Module> submodule, int stage_index, int num_stages,
                             Device device, std::vector<TensorMeta> input_meta,
                             std::vector<TensorMeta> output_meta, DwBuilder dw_builder)
    : module_(std::move(submodule)),
      stage_index_(stage_index),
      num_stages_(num_stages),
      device_(device),
      input_meta_(std::move(input_meta)),
      output_meta_(std::move(output_meta)),
      dw_builder_(std::move(dw_builder)) {
  check_stage(module_, stage_index, num_stages);
  module_->to(device_);
}

PipelineStage::PipelineStage(std::shared_ptr<nn::Module> submodule, int stage_index, int num_stages,
                             Device device, std::vector<Tensor> example_inputs,
                             DwBuilder dw_builder)
    : module_(std::move(submodule)),
      stage_index_(stage_index),
      num_stages_(num_stages),
      device_(device),
      dw_builder_(std::move(dw_builder)) {
  check_stage(module_, stage_index, num_stages);
  if (example_inputs.empty())
    throw std::invalid_argument(stage_name(stage_index) +
                                ": needs at least one example input (one microbatch)");
  module_->to(device_);
  std::vector<Tensor> on_device;
  for (const Tensor& t : example_inputs) {
    if (!t.defined())
      throw std::invalid_argument(stage_name(stage_index) + ": an example input is undefined");
    input_meta_.push_back({t.shape(), t.dtype()});
    on_device.push_back(t.detach().to(device_));
  }
  NoGradGuard no_grad;  // shape inference only
  for (const Tensor& out : module_->forward_outputs(on_device, {}))
    output_meta_.push_back({out.shape(), out.dtype()});
}

void PipelineStage::validate_inputs(int mb, const std::vector<Tensor>& inputs) const {
  if (inputs.size() != input_meta_.size())
    throw StageInputError(stage_name(stage_index_) + ", microbatch " + std::to_string(mb) +
                          ": expected " + std::to_string(input_meta_.size()) + " inputs, got " +
                          std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorMeta& want = input_meta_[i];
    const Tensor& t = inputs[i];
    // The batch dimension may differ (uneven microbatches); every other size must match.
    bool ok = t.defined() && t.dtype() == want.dtype &&
              t.dim() == static_cast<int64_t>(want.shape.size());
    for (size_t d = 1; ok && d < want.shape.size(); ++d) ok = t.shape()[d] == want.shape[d];
    if (!ok)
      throw StageInputError(stage_name(stage_index_) + ", microbatch " + std::to_string(mb) +
                            ", input " + std::to_string(i) +
                            (i < input_names_.size() ? " ('" + input_names_[i] + "')" : "") +
                            ": expected " + to_string(want) + " (batch size may vary), got " +
                            (t.defined() ? to_string(TensorMeta{t.shape(), t.dtype()})
                                         : std::string("an undefined tensor")));
  }
}

void PipelineStage::set_num_threads(int n) {
  if (n < 0)
    throw std::invalid_argument(stage_name(stage_index_) +
                                ": set_num_threads needs n >= 1 (or 0 "
                                "for the thread's own count), got " +
                                std::to_string(n));
  num_threads_ = n;
}

void PipelineStage::set_concurrent_threads(int n) {
  if (n < 1)
    throw std::invalid_argument(stage_name(stage_index_) +
                                ": set_concurrent_threads needs n >= 1, got " + std::to_string(n));
  concurrent_threads_ = n;
}

void PipelineStage::apply_num_threads() const {
  if (num_threads_ > 0)
    tensorplay::set_num_threads(num_threads_);
  else
    tensorplay::set_compute_threads(concurrent_threads_);
}

std::vector<Tensor> PipelineStage::forward(int mb, const std::vector<Tensor>& inputs,
                                           const nn::TensorDict& kwargs, bool keep_activations) {
  Running running(*owner_);
  validate_inputs(mb, inputs);
  apply_num_threads();
  if (stash_.count(mb))
    throw std::logic_error(stage_name(stage_index_) + ": forward of microbatch " +
                           std::to_string(mb) + " ran twice without its backward");
  Stash s;
  for (const Tensor& t : inputs) {
    Tensor leaf = t.detach().to(device_);
    // The first stage's inputs are data; later stages' inputs are activations whose gradients
    // are sent back.
    if (!is_first()) leaf.set_requires_grad(true);
    s.inputs.push_back(leaf);
  }
  if (!kwargs.empty() && !is_first())
    throw std::invalid_argument(stage_name(stage_index_) +
                                ": keyword inputs go to the first stage only");
  nn::TensorDict on_device;
  for (const auto& [name, t] : kwargs) on_device.emplace(name, t.detach().to(device_));
  // A stage whose recomputation is skipped keeps every microbatch's activations, as one whose
  // policy selects nothing. Only a stage of one recomputed segment keeps them for a backward that
  // comes next: one of several segments rebuilds one segment at a time, which holds less.
  const bool keep_all = (keep_activations || skip_recompute_) && recomputed_modules_.size() == 1;
  {
    std::optional<autograd::KeepActivationsGuard> keep;
    if (keep_all) keep.emplace();
    s.outputs = module_->forward_outputs(s.inputs, on_device);
  }
  s.rebuilt_ahead = keep_all;  // nothing to rebuild
  s.kept = keep_all;
  std::vector<Tensor> to_send;
  for (const Tensor& out : s.outputs) to_send.push_back(out.detach());
  if (!autograd::grad_enabled()) {
    return to_send;  // evaluation: nothing to keep
  }
  // The backward needs of an output its history and its gradient, not its values, which go on
  // to the next stage (Megatron's deallocated pipeline outputs): the stash keeps no second
  // reference to them, so they live only as long as the next stage or what a backward saved
  // needs them (the last stage's loss keeps what it needs of its outputs, compute_loss).
  if (!is_last())
    for (Tensor& out : s.outputs) out = history_of(out);
  stash_.emplace(mb, std::move(s));
  note_stash_size();
  return to_send;
}

Tensor PipelineStage::compute_loss(int mb, const Tensor& target, const LossFn& loss_fn) {
  apply_num_threads();
  if (!is_last())
    throw std::logic_error(stage_name(stage_index_) + " is not the last stage: no loss here");
  Stash& s = stash_of(mb, "compute_loss");
  if (s.outputs.size() != 1)
    throw std::invalid_argument(
        "the last stage must produce exactly one output to compute a "
        "loss, got " +
        std::to_string(s.outputs.size()));
  s.loss = loss_fn(s.outputs[0], target.to(device_));
  if (!s.loss.defined() || s.loss.numel() != 1)
    throw std::invalid_argument("loss function must return a scalar tensor");
  drop_outputs_for_loss(s);
  return s.loss.detach();
}

Tensor PipelineStage::compute_loss(int mb, const Tensor& target, const OutputsLossFn& loss_fn) {
  if (!is_last())
    throw std::logic_error(stage_name(stage_index_) + " is not the last stage: no loss here");
  Stash& s = stash_of(mb, "compute_loss");
  s.loss = loss_fn(s.outputs, target.to(device_));
  if (!s.loss.defined() || s.loss.numel() != 1)
    throw std::invalid_argument("loss function must return a scalar tensor");
  drop_outputs_for_loss(s);
  return s.loss.detach();
}

void PipelineStage::drop_outputs_for_loss(Stash& s) const {
  // The loss holds what its backward needs of the outputs; the step keeps them for the caller
  // apart (StepData::outputs), so the stash lets go of its own reference.
  s.outputs.clear();
}

PipelineStage::Stash& PipelineStage::stash_of(int mb, const char* what) {
  auto it = stash_.find(mb);
  if (it == stash_.end())
    throw std::logic_error(stage_name(stage_index_) + ": " + what + " of microbatch " +
                           std::to_string(mb) + " before its forward");
  return it->second;
}

std::pair<std::vector<Tensor>, std::vector<Tensor>> PipelineStage::backward_roots(
    int mb, Stash& s, const std::vector<Tensor>& output_grads, float loss_scale) const {
  std::vector<Tensor> roots, grads;
  if (is_last()) {
    if (!s.loss.defined())
      throw std::logic_error(stage_name(stage_index_) + ": backward of microbatch " +
                             std::to_string(mb) + " without a loss (call compute_loss first)");
    roots.push_back(s.loss);
    grads.push_back(full(s.loss.shape(), loss_scale, {.device = device_}));
    return {roots, grads};
  }
  if (output_grads.size() != s.outputs.size())
    throw std::invalid_argument(stage_name(stage_index_) + ": got " +
                                std::to_string(output_grads.size()) + " output gradients for " +
                                std::to_string(s.outputs.size()) + " outputs");
  for (size_t i = 0; i < s.outputs.size(); ++i) {
    if (!s.outputs[i].requires_grad() || !output_grads[i].defined()) continue;
    roots.push_back(s.outputs[i]);
    grads.push_back(output_grads[i].to(device_));
  }
  return {roots, grads};
}

std::vector<Tensor> PipelineStage::input_grads(const Stash& s) const {
  std::vector<Tensor> grads;
  if (is_first()) return grads;
  for (const Tensor& in : s.inputs) grads.push_back(in.grad());
  return grads;
}

std::vector<Tensor> PipelineStage::backward(int mb, const std::vector<Tensor>& output_grads,
                                            float loss_scale) {
  Running running(*owner_);
  Stash& s = stash_of(mb, "backward");
  apply_num_threads();
  auto [roots, grads] = backward_roots(mb, s, output_grads, loss_scale);
  if (!roots.empty()) autograd::backward(roots, grads);
  std::vector<Tensor> result = input_grads(s);
  stash_.erase(mb);
  note_stash_size();
  // As PyTorch: a fused backward has computed the weight gradients, so its runner runs now.
  if (DwRunner runner = build_dw_runner()) runner();
  return result;
}

std::vector<Tensor> PipelineStage::backward_input(int mb, const std::vector<Tensor>& output_grads,
                                                  float loss_scale) {
  Running running(*owner_);
  Stash& s = stash_of(mb, "backward_input");
  apply_num_threads();
  auto [roots, grads] = backward_roots(mb, s, output_grads, loss_scale);
  std::vector<Tensor> targets;
  for (const Tensor& in : s.inputs)
    if (in.requires_grad()) targets.push_back(in);
  // A stage with a recompute policy (its recomputation skipped or not) computes every weight
  // gradient here (its embeddings' and head's too), each added to .grad as soon as computed, as a
  // full backward does, rather than holding a parameter's bytes per microbatch until W: a stage's
  // I runs in its W's order, so the sums are the same bits. Its W only runs dw_runner. A stage
  // that selects no module is a plain stage here.
  // A microbatch whose forward kept its activations runs the I of a plain stage (its weight
  // work waits in the stash for W) unless its weights are small next to its input
  // (weight_grads_in_pass): computing the weight gradients in this pass holds each one on top of
  // the activations, where a plain stage computes them after I has freed its part.
  const bool all_weight_grads =
      !recomputed_modules_.empty() &&
      (!s.kept || weight_grads_in_pass(module_->parameters(), input_meta_));
  if (!roots.empty())
    s.weight_work = autograd::backward_input(roots, grads, targets, all_weight_grads);
  if (all_weight_grads) autograd::backward_weight(std::move(s.weight_work));
  s.input_grads_done = true;
  s.dw_runner = build_dw_runner();
  std::vector<Tensor> result = input_grads(s);
  s.outputs.clear();  // the graph lives on in the weight stash
  s.loss = Tensor();
  s.inputs.clear();  // their gradients are on their way; W reads neither
  return result;
}

void PipelineStage::backward_weight(int mb) {
  Running running(*owner_);
  Stash& s = stash_of(mb, "backward_weight");
  apply_num_threads();
  if (!s.input_grads_done)
    throw std::logic_error(stage_name(stage_index_) + ": backward_weight of microbatch " +
                           std::to_string(mb) + " before its backward_input");
  autograd::backward_weight(std::move(s.weight_work));
  DwRunner runner = std::move(s.dw_runner);
  stash_.erase(mb);
  note_stash_size();
  if (runner) runner();
}

bool PipelineStage::can_recompute_ahead(int mb) const {
  if (!recomputes()) return false;
  auto it = stash_.find(mb);
  return it != stash_.end() && !it->second.input_grads_done && !it->second.rebuilt_ahead;
}

void PipelineStage::recompute_ahead(int mb) {
  if (!can_recompute_ahead(mb)) return;
  Running running(*owner_);
  Stash& s = stash_.at(mb);
  apply_num_threads();
  s.rebuilt_ahead = true;
  std::vector<Tensor> roots = s.outputs;  // their histories
  if (s.loss.defined()) roots.push_back(s.loss);
  autograd::recompute_ahead(roots);
}

DwRunner PipelineStage::build_dw_runner() const {
  DwRunner user = dw_builder_ ? dw_builder_() : nullptr;
  DwRunner runtime = runtime_dw_builder_ ? runtime_dw_builder_() : nullptr;
  if (!runtime) return user;
  if (!user) return runtime;
  return [user = std::move(user), runtime = std::move(runtime)] {
    user();
    runtime();
  };
}

void PipelineStage::clear() {
  stash_.clear();
  note_stash_size();
}

void PipelineStage::set_recompute(RecomputePolicy policy) {
  const int running = owner_->running.load();
  const size_t stashed = owner_->stashed.load();
  if (running > 0 || stashed > 0)
    throw std::logic_error(
        stage_name(stage_index_) + ": set_recompute while the stage is running (" +
        (running > 0 ? std::string("an action is running")
                     : std::to_string(stashed) + " microbatch(es) between forward and backward") +
        "); set it before the schedule's step or after it returns (clear() drops a failed "
        "step's microbatches)");
  if (policy.mode == RecomputePolicy::Mode::EveryKth && policy.every < 1)
    policy = RecomputePolicy::every_kth(policy.every);  // throws, naming K
  std::vector<std::string> paths = recomputed_module_paths(*module_, policy);
  if (auto* stage_module = dynamic_cast<StageModule*>(module_.get())) {
    // Mirrored modules that run no op here (a tied weight's owner) have nothing to recompute.
    std::erase_if(paths, [&](const std::string& p) { return !stage_module->runs_ops_of(p); });
    stage_module->set_recomputed_modules(paths);
  } else {
    for (const auto& [path, m] : module_->named_modules()) m->set_checkpointed(false);
    for (const std::string& path : paths) module_->find_module(path)->set_checkpointed(true);
  }
  recompute_ = std::move(policy);
  recomputed_modules_ = std::move(paths);
}

void PipelineStage::set_skip_recompute(bool skip) {
  const int running = owner_->running.load();
  const size_t stashed = owner_->stashed.load();
  if (running > 0 || stashed > 0)
    throw std::logic_error(stage_name(stage_index_) +
                           ": set_skip_recompute while the stage is running or holds a microbatch; "
                           "set it between steps");
  skip_recompute_ = skip;
}

void PipelineStage::claim(const void* owner, const std::string& owner_name) {
  std::lock_guard lock(owner_->mutex);
  if (owner_->holder && owner_->holder != owner)
    throw std::logic_error("stage " + std::to_string(stage_index_) + " already belongs to a " +
                           owner_->name +
                           " that is still alive; a stage belongs to one schedule at a time: "
                           "destroy that schedule first, or build separate stages for this one");
  owner_->holder = owner;
  owner_->name = owner_name;
}

void PipelineStage::release(const void* owner) {
  std::lock_guard lock(owner_->mutex);
  if (owner_->holder == owner) {
    owner_->holder = nullptr;
    owner_->name.clear();
  }
}

}  // namespace tensorplay::pipelining

namespace tensorplay::pipelining {

std::vector<int> PipelineStage::group_ranks() const {
  if (mesh_.empty()) return {};
  return mesh_["pp"].ranks();
}

void PipelineStage::set_mesh(distributed::DeviceMesh mesh) {
  if (!mesh.empty() && !mesh.has_dim("pp"))
    throw std::invalid_argument("PipelineStage " + std::to_string(stage_index()) + ": " +
                                distributed::to_string(mesh) +
                                " has no \"pp\" dimension; name the pipeline dimension \"pp\" "
                                "(init_device_mesh({pp, dp}, {\"pp\", \"dp\"}))");
  mesh_ = std::move(mesh);
}

}  // namespace tensorplay::pipelining
