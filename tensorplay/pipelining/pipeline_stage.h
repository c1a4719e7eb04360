// PipelineStage: one stage's module plus what the runtime calls per microbatch (forward, full
// backward, input-only backward, weight-only backward), each with its stash keyed by microbatch.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tensorplay/core/autograd/engine.h"
#include "tensorplay/core/memory_accounting.h"
#include "tensorplay/core/tensor.h"
#include "tensorplay/distributed/device_mesh.h"
#include "tensorplay/nn/module.h"
#include "tensorplay/pipelining/recompute.h"
#include "tensorplay/pipelining/tensor_meta.h"

namespace tensorplay::pipelining {

struct PipeDigest;

/// Computes a microbatch's loss from the last stage's output and the target.
using LossFn = std::function<Tensor(const Tensor& output, const Tensor& target)>;
/// The same from every output of the last stage (PyTorch passes a multi-output stage's tuple).
using OutputsLossFn =
    std::function<Tensor(const std::vector<Tensor>& outputs, const Tensor& target)>;

/// What a DwBuilder builds: the weight-gradient step of one microbatch, beyond the stage's own
/// weight gradients (e.g. starting a gradient all-reduce once the last microbatch's are in).
using DwRunner = std::function<void()>;
/// PyTorch's `dw_builder`: called when a microbatch's input-gradient backward (I) runs; the
/// runner it returns runs when the schedule runs that microbatch's W, right after the stage has
/// accumulated the microbatch's weight gradients. A full backward (B) builds a runner and runs it
/// at once, after its weight gradients. So runners run once per W (or B) action, in the order the
/// schedule runs them, on the rank's thread, and may overlap communication with the backward
/// work still to come. (PyTorch's runner computes the weight gradients itself; here autograd's
/// split backward computes them, and the runner adds to that.)
using DwBuilder = std::function<DwRunner()>;

/// Thrown when a microbatch's input does not match what the stage was built for.
class StageInputError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// One stage of a pipeline, hosted on one device.
class PipelineStage {
 public:
  /// A stage from a user-built submodule. `example_inputs` are one microbatch of this stage's
  /// inputs (on any device): the stage runs them once to learn its output shapes.
  PipelineStage(std::shared_ptr<nn::Module> submodule, int stage_index, int num_stages,
                Device device, std::vector<Tensor> example_inputs, DwBuilder dw_builder = nullptr);
  /// A stage whose input and output shapes are known already (build_stage takes them from the
  /// Pipe's trace), so no example forward runs.
  PipelineStage(std::shared_ptr<nn::Module> submodule, int stage_index, int num_stages,
                Device device, std::vector<TensorMeta> input_meta,
                std::vector<TensorMeta> output_meta, DwBuilder dw_builder = nullptr);

  // -- observers ---------------------------------------------------------------------------------

  int stage_index() const { return stage_index_; }
  int num_stages() const { return num_stages_; }
  bool is_first() const { return stage_index_ == 0; }
  bool is_last() const { return stage_index_ == num_stages_ - 1; }
  Device device() const { return device_; }
  nn::Module& module() const { return *module_; }
  const std::shared_ptr<nn::Module>& module_ptr() const { return module_; }
  /// Shapes and dtypes of the inputs and outputs of one microbatch.
  const std::vector<TensorMeta>& input_meta() const { return input_meta_; }
  const std::vector<TensorMeta>& output_meta() const { return output_meta_; }
  /// Names of the inputs, used in error messages (build_stage sets the traced value names).
  const std::vector<std::string>& input_names() const { return input_names_; }
  void set_input_names(std::vector<std::string> names) { input_names_ = std::move(names); }
  /// Parameters this stage shares with other stages (tied weights): name -> every stage holding
  /// a copy. build_stage fills it from the Pipe; schedules sum the copies' gradients per step.
  const std::map<std::string, std::vector<int>>& tied_parameters() const { return tied_; }
  /// Global ranks of the process group this stage's traffic goes over: its mesh's "pp"
  /// dimension (empty without a mesh: the world group).
  std::vector<int> group_ranks() const;
  /// Where this stage runs (build_stage with a mesh or a process group; empty otherwise): its
  /// "pp" dimension carries the stage-to-stage traffic; across its "dp" dimension, if any, the
  /// stage is replicated and schedules average its gradients every step. The stage's one
  /// placement: its group follows from it. Throws std::invalid_argument for a mesh without a
  /// "pp" dimension.
  const distributed::DeviceMesh& get_mesh() const { return mesh_; }
  void set_mesh(distributed::DeviceMesh mesh);
  void set_tied_parameters(std::map<std::string, std::vector<int>> tied) {
    tied_ = std::move(tied);
  }
  /// The weight-gradient step builder (PyTorch's `dw_builder`; null: none). Set it before a step.
  const DwBuilder& dw_builder() const { return dw_builder_; }
  void set_dw_builder(DwBuilder builder) { dw_builder_ = std::move(builder); }
  /// The runtime's own weight-gradient step (a schedule's data-parallel gradient sync): built
  /// and run like dw_builder, after the user's. Schedules set it; null: none.
  void set_runtime_dw_builder(DwBuilder builder) { runtime_dw_builder_ = std::move(builder); }
  /// The Pipe this stage was built from (Pipe::id; 0 for a stage built by hand).
  uint64_t pipe_id() const { return pipe_id_; }
  void set_pipe_id(uint64_t id) { pipe_id_ = id; }
  /// What the Pipe this stage was built from is (build_stage sets it; null for a stage built by
  /// hand). A schedule across processes compares it with the other ranks' at construction.
  const std::shared_ptr<const PipeDigest>& pipe_digest() const { return pipe_digest_; }
  void set_pipe_digest(std::shared_ptr<const PipeDigest> digest) {
    pipe_digest_ = std::move(digest);
  }

  /// A stage belongs to one schedule at a time: the schedule's constructor claims it (throws
  /// std::logic_error naming the current owner when another live schedule holds it) and its
  /// destructor releases it.
  void claim(const void* owner, const std::string& owner_name);
  void release(const void* owner);

  /// The account the bytes allocated by this stage's actions are charged to (a schedule's stage
  /// worker sets it around each action and gives it the rank's account as parent).
  const std::shared_ptr<MemoryAccount>& memory_account() const { return memory_; }

  /// Microbatches whose activations are held (from forward until their backward is done).
  size_t stashed_microbatches() const { return stash_.size(); }
  /// Threads this stage's host products use (0: the computing thread's own count, see
  /// tensorplay/core/cpu_threads.h). Each forward and backward sets it on the thread that runs it
  /// (a stage actor's own thread), where it stays.
  int num_threads() const { return num_threads_; }
  /// Sets the stage's product thread count (>= 1; 0 restores the thread's own count).
  void set_num_threads(int n);
  /// How many threads of this process run stages at once (the embedded runtime's stage actors;
  /// the schedule sets it). With no thread setting anywhere, the stage computes on its share of
  /// the cores (tensorplay/core/cpu_threads.h, thread_share). Throws std::invalid_argument for n
  /// < 1.
  void set_concurrent_threads(int n);

  // -- recomputation ------------------------------------------------------------------------------

  /// Recomputes the modules `policy` chooses (see tensorplay/pipelining/recompute.h): they keep
  /// only their inputs from a microbatch's forward to its backward, which runs their forward again
  /// (in B, or in I, whose W uses what I kept). Losses and gradients stay the same bit for bit. A
  /// stage built from a traced model (build_stage) runs each chosen module's ops under one
  /// checkpoint; a stage of a user module checkpoints the chosen submodules' calls
  /// (nn::checkpoint_wrapper). Replaces the previous policy. Set it between steps: throws
  /// std::logic_error while the stage runs an action or holds a microbatch between its forward and
  /// its backward.
  void set_recompute(RecomputePolicy policy);
  const RecomputePolicy& recompute() const { return recompute_; }
  /// The modules recomputed under the policy (dotted paths), in the model's order.
  const std::vector<std::string>& recomputed_modules() const { return recomputed_modules_; }
  /// Whether the stage recomputes: its policy selects a module here and its recomputation is not
  /// skipped. A policy that selects nothing leaves the stage as it was without one.
  bool recomputes() const { return !recomputed_modules_.empty() && !recompute_skipped(); }
  /// Skips recomputation where it would save nothing: the stage then keeps its activations and
  /// runs its backward as a stage without recomputation does (its I keeps a weight stash for W,
  /// unless its largest weight is no larger than its input: then its I computes the weight
  /// gradients in its pass, as for a rebuilt microbatch). A schedule asks for it on a stage whose
  /// every forward is followed at once in its rank's order by that microbatch's own backward
  /// (schedules::stages_with_backward_after_each_forward); it applies to a stage of one
  /// recomputed segment (recompute_skipped()). Set between steps, as set_recompute.
  void set_skip_recompute(bool skip);
  /// Whether the recomputation is skipped: set_skip_recompute asked for it and the stage
  /// recomputes one segment (one module), which a backward right after its forward would rebuild
  /// whole at once. A stage of several segments rebuilds one at a time and so keeps recomputing.
  bool recompute_skipped() const { return skip_recompute_ && recomputed_modules_.size() == 1; }

  // -- per-microbatch work -----------------------------------------------------------------------

  /// Runs forward for microbatch `mb`; returns the outputs to send on (no autograd history).
  /// `kwargs` (the first stage only) go to the module's forward as keyword inputs. With
  /// `keep_activations`, a recomputing stage keeps this microbatch's activations as a stage that
  /// does not recompute would (autograd::KeepActivationsGuard): for a backward that comes next,
  /// which would rebuild them at once. The gradients are the same bits either way.
  std::vector<Tensor> forward(int mb, const std::vector<Tensor>& inputs,
                              const nn::TensorDict& kwargs = {}, bool keep_activations = false);
  /// Last stage only: the loss of microbatch `mb` against `target` (kept for its backward).
  Tensor compute_loss(int mb, const Tensor& target, const LossFn& loss_fn);
  /// The same from all of the stage's outputs (for a last stage with several).
  Tensor compute_loss(int mb, const Tensor& target, const OutputsLossFn& loss_fn);
  /// Full backward of `mb`: from the loss (last stage, seeded with `loss_scale`) or from the
  /// gradients of this stage's outputs. Returns the gradients of the stage inputs to send back
  /// (empty on the first stage).
  std::vector<Tensor> backward(int mb, const std::vector<Tensor>& output_grads,
                               float loss_scale = 1.0f);
  /// Input-only backward (I): returns input gradients and keeps what backward_weight needs. A
  /// recomputing stage computes its weight gradients here too and adds them to .grad at once (its
  /// I runs in its W's order, so the sums are the same bits); its backward_weight still follows.
  /// A microbatch whose forward kept its activations (keep_activations, a skipped recomputation)
  /// gets a plain stage's I instead where the stage's largest weight outweighs its input.
  std::vector<Tensor> backward_input(int mb, const std::vector<Tensor>& output_grads,
                                     float loss_scale = 1.0f);
  /// Weight-only backward (W) of a microbatch whose backward_input has run.
  void backward_weight(int mb);
  /// Whether recompute_ahead(mb) has work: the stage recomputes, `mb`'s forward ran, its
  /// backward has not begun, and nothing was rebuilt ahead for it yet.
  bool can_recompute_ahead(int mb) const;
  /// For a recomputing stage while microbatch `mb` waits for its output gradients: rebuilds now
  /// the activations its backward would rebuild first (autograd::recompute_ahead; at most once
  /// per microbatch, so the stage never holds more than its backward would), and the backward
  /// finds them ready. Losses and gradients are unchanged bit for bit. Does nothing unless
  /// can_recompute_ahead(mb).
  void recompute_ahead(int mb);
  /// Drops every stashed microbatch (after an error, or before a new step).
  void clear();
  /// Throws StageInputError unless `inputs` match the stage's input shapes and dtypes (the
  /// batch dimension may differ, for uneven microbatches).
  void validate_inputs(int mb, const std::vector<Tensor>& inputs) const;

 private:
  void apply_num_threads() const;

  struct Stash {
    std::vector<Tensor> inputs;   // leaves that require grad
    std::vector<Tensor> outputs;  // with history
    Tensor loss;
    autograd::WeightGradStash weight_work;
    bool input_grads_done = false;
    bool rebuilt_ahead = false;  // recompute_ahead ran for it, or its forward kept them
    bool kept = false;           // its forward kept its activations: a plain stage's backward
    DwRunner dw_runner;          // built at I, run at W (the user's, then the runtime's)
  };
  DwRunner build_dw_runner() const;
  void drop_outputs_for_loss(Stash& s) const;
  std::pair<std::vector<Tensor>, std::vector<Tensor>> backward_roots(
      int mb, Stash& s, const std::vector<Tensor>& output_grads, float loss_scale) const;
  Stash& stash_of(int mb, const char* what);
  std::vector<Tensor> input_grads(const Stash& s) const;

  std::shared_ptr<nn::Module> module_;
  int stage_index_;
  int num_stages_;
  Device device_;
  std::vector<TensorMeta> input_meta_;
  std::vector<TensorMeta> output_meta_;
  std::vector<std::string> input_names_;
  std::map<std::string, std::vector<int>> tied_;
  int num_threads_ = 0;         // 0: the computing thread's own count
  int concurrent_threads_ = 1;  // threads of this process running stages at once
  std::map<int, Stash> stash_;
  DwBuilder dw_builder_;
  DwBuilder runtime_dw_builder_;
  distributed::DeviceMesh mesh_;
  uint64_t pipe_id_ = 0;
  std::shared_ptr<const PipeDigest> pipe_digest_;
  RecomputePolicy recompute_;
  std::vector<std::string> recomputed_modules_;
  bool skip_recompute_ = false;
  std::shared_ptr<MemoryAccount> memory_ = std::make_shared<MemoryAccount>();
  struct Owner {
    std::mutex mutex;
    const void* holder = nullptr;
    std::string name;
    /// Actions running now and microbatches stashed, readable from any thread (set_recompute).
    std::atomic<int> running{0};
    std::atomic<size_t> stashed{0};
  };
  /// Counts an action as running for its lifetime.
  struct Running {
    explicit Running(Owner& o) : owner(o) { ++owner.running; }
    ~Running() { --owner.running; }
    Owner& owner;
  };
  void note_stash_size() { owner_->stashed = stash_.size(); }
  std::shared_ptr<Owner> owner_ = std::make_shared<Owner>();
};

}  // namespace tensorplay::pipelining
