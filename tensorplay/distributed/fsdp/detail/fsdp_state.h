// The sharding state of one module fully_shard was applied to (private to fsdp/): its
// parameters' shards, the gathers in flight, and what runs around its forward and backward.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensorplay/distributed/fsdp/fully_shard_options.h"
#include "tensorplay/distributed/work.h"

namespace tensorplay::distributed::fsdp::detail {

/// One parameter of a sharded module. `param` is the module's own handle: between steps it views
/// `shard`; while gathered it views the gathered tensor (its TensorImpl is repointed, so the
/// module, the autograd graph and the optimizer all see the same handle).
struct ShardedParam {
  std::string name;
  Tensor param;
  Shape full_shape;
  DType master_dtype = DType::Float32;
  int64_t rows = 0;    ///< rows of dim 0 per shard (padded)
  Tensor shard;        ///< this rank's master rows, [rows, ...]
  Tensor stash_grad;   ///< the shard gradient, while the parameter is gathered
  Tensor full_grad;    ///< gradients accumulated without sync
  Tensor gathered;     ///< the gathered parameter, [rows * n, ...] (padded)
  int64_t inner = 1;   ///< elements per row
  size_t bucket = 0;   ///< index of its bucket
  int64_t offset = 0;  ///< where its shard starts in a member's chunk of the bucket
};

/// The parameters of one module gathered (and their gradients reduced) in one collective: those
/// of one compute dtype and one reduce dtype. A member's chunk is its shards one after another.
struct Bucket {
  DType compute = DType::Float32;
  DType reduce = DType::Float32;
  std::vector<size_t> params;
  int64_t total = 0;  ///< elements of a member's chunk
  Tensor gathered;    ///< every member's chunk, [n * total]
  Work gather;
};

class FsdpState : public std::enable_shared_from_this<FsdpState> {
 public:
  FsdpState(ProcessGroup group, FullyShardOptions options, std::vector<ShardedParam> params);
  /// Cuts every parameter to this rank's shard (once, at fully_shard).
  void shard_parameters();
  void unshard_async();
  void wait_unshard();
  void unshard() {
    unshard_async();
    wait_unshard();
  }
  void reshard();
  void pre_forward(std::vector<Tensor>& args);
  void post_forward(Tensor& output);
  void pre_backward();
  /// A parameter's gradient was accumulated: after the last expected one, post_backward.
  void accumulated();
  void post_backward();
  /// post_backward with sync on and the parameters kept gathered (gathered first if they are
  /// not): the reduce-scatter of whatever gradients were accumulated.
  void reduce_grad();
  void set_reshard_after_forward(bool reshard) { options_.reshard_after_forward = reshard; }
  bool reshard_after_forward() const { return options_.reshard_after_forward; }

  const ProcessGroup& group() const { return group_; }
  std::vector<ShardedParam>& params() { return params_; }
  /// Whether the parameters view the gathered tensors now.
  bool gathered() const { return gathered_; }
  bool sync = true;
  bool reshard_after_backward = true;
  std::vector<std::weak_ptr<FsdpState>> forward_prefetch, backward_prefetch;

 private:
  Shape shard_shape(const ShardedParam& p, int64_t rows) const;
  DType compute_dtype(const ShardedParam& p) const;
  int count_leaf_edges(const Tensor& output) const;
  void make_buckets();
  void copy_out(ShardedParam& p, const Bucket& b);

  ProcessGroup group_;
  FullyShardOptions options_;
  std::vector<ShardedParam> params_;
  std::vector<Bucket> buckets_;
  bool gathered_ = false;  // params view the gathered tensors
  bool gathering_ = false;
  int pending_ = 0;  // gradient accumulations still expected in this backward
  uint64_t forward_start_ = 0;
};

/// The sharding state holding the parameter whose TensorImpl is `impl`, and its entry there; a
/// null state when no live sharded module holds it.
std::pair<std::shared_ptr<FsdpState>, ShardedParam*> sharded_param_of(const TensorImpl* impl);

}  // namespace tensorplay::distributed::fsdp::detail
