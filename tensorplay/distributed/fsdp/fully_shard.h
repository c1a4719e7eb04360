// fully_shard, spelled as PyTorch's FSDP2: a module's parameters stored as this rank's dim-0
// shard, gathered around its forward and backward, its gradients reduce-scattered after.
#pragma once

#include <memory>
#include <vector>

#include "tensorplay/distributed/fsdp/fully_shard_options.h"
#include "tensorplay/distributed/process_group.h"
#include "tensorplay/nn/module.h"

namespace tensorplay::distributed::fsdp {

namespace detail {
class FsdpState;
}

/// A module fully_shard was applied to (FSDP2's FSDPModule): the handle of its sharding state.
class FSDPModule {
 public:
  /// Gathers the module's parameters now (the module's own, not its sharded children's).
  void unshard() const;
  /// Starts that gather and returns (FSDP2's unshard(async_op=True)): unshard(), the forward or
  /// reshard() waits for it.
  void unshard_async() const;
  /// Frees the gathered parameters: the module's parameters are this rank's shards again.
  void reshard() const;
  /// When false, backward keeps the gradients unsharded and accumulates them (no collective);
  /// the next backward with sync on reduce-scatters their sum.
  void set_requires_gradient_sync(bool sync) const;
  /// When false, the parameters stay gathered after backward (call reshard() before stepping
  /// an optimizer: it updates the shards).
  void set_reshard_after_backward(bool reshard) const;
  /// When false, the parameters stay gathered after forward until the backward is done
  /// (FullyShardOptions::reshard_after_forward, changed).
  void set_reshard_after_forward(bool reshard) const;
  /// Whether backward reduce-scatters the gradients (set_requires_gradient_sync).
  bool requires_gradient_sync() const;
  /// Whether the parameters go back to shards after backward (set_reshard_after_backward).
  bool reshard_after_backward() const;
  /// Whether the parameters go back to shards after forward (set_reshard_after_forward).
  bool reshard_after_forward() const;
  /// Reduce-scatters now the gradients accumulated so far (those kept without sync and those
  /// of backwards whose reduction has not run), as a synced backward ends: what the pipeline
  /// schedules' REDUCE_GRAD action does after a stage's last backward of a step. Gathers the
  /// parameters first when they are not. Collective over the group.
  void reduce_grad() const;
  /// Modules (sharded) whose all-gather starts when this module's forward starts.
  void set_modules_to_forward_prefetch(const std::vector<FSDPModule>& modules) const;
  /// Modules (sharded) whose all-gather starts when this module's backward starts.
  void set_modules_to_backward_prefetch(const std::vector<FSDPModule>& modules) const;
  /// The group the parameters are sharded over.
  const ProcessGroup& group() const;
  /// Bytes of this module's own parameter shards on this rank (padding included).
  size_t shard_bytes() const;

  /// Made by fully_shard.
  explicit FSDPModule(std::shared_ptr<detail::FsdpState> state) : state_(std::move(state)) {}

 private:
  std::shared_ptr<detail::FsdpState> state_;
};

/// Shards `module`'s parameters over `options.mesh` (those not already held by a sharded
/// submodule; apply it to each block first, then to the root, as torchtitan does): each becomes
/// this rank's rows of dim 0 (ceil(rows / n) of them, the last shards padded with zeros), in
/// place, so build the optimizer afterwards. Before the module's forward its parameters are
/// all-gathered (cast to mp_policy.param_dtype), and again before its backward when resharded;
/// after its backward, the gradients are reduce-scattered (averaged over the group, in
/// reduce_dtype) into shard gradients, so gradients and optimizer state exist only as shards.
/// Collective: every member calls it with a module of the same parameter shapes. Throws
/// std::invalid_argument for a module already sharded, parameters on mixed devices or a rank
/// outside the group, and DistributedError, on every member, when the members' parameters differ.
FSDPModule fully_shard(const std::shared_ptr<nn::Module>& module, FullyShardOptions options = {});
template <typename Holder, typename = typename Holder::ImplType>
FSDPModule fully_shard(const Holder& module, FullyShardOptions options = {}) {
  return fully_shard(std::static_pointer_cast<nn::Module>(module.ptr()), std::move(options));
}

/// Whether `parameter` is held, as a shard, by a module fully_shard was applied to.
bool is_sharded(const Tensor& parameter);

/// The modules of `root`'s tree (root included, pre-order) that fully_shard was applied to.
std::vector<FSDPModule> sharded_modules(const std::shared_ptr<nn::Module>& root);

/// clip_grad_norm for sharded parameters: the global L2 norm of the gradients over the shards of
/// every member of `group` (an all-reduce of the squared norms), gradients scaled by
/// max_norm / (norm + 1e-6) when below 1. Returns the norm before clipping. Collective.
float clip_grad_norm(const std::vector<Tensor>& parameters, float max_norm,
                     const ProcessGroup& group);

}  // namespace tensorplay::distributed::fsdp
