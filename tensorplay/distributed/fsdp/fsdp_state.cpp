// FsdpState: a sharded module's parameters repointed between their shard and the gathered
// tensor around forward and backward, and its gradients reduce-scattered after backward.
#include "tensorplay/distributed/fsdp/detail/fsdp_state.h"

#include <unordered_set>

#include "tensorplay/core/autograd/grad_mode.h"
#include "tensorplay/core/autograd/node.h"
#include "tensorplay/tensor.h"

namespace tensorplay::distributed::fsdp::detail {
namespace {

/// Makes `param`'s handle view `data` (storage, offset, shape, dtype), keeping its identity.
void point_at(const Tensor& param, const Tensor& data) {
  TensorImpl& impl = param.impl();
  impl.storage = data.impl().storage;
  impl.offset = data.impl().offset;
  impl.shape = data.shape();
  impl.dtype = data.dtype();
}

/// Reads the autograd sequence counter: nodes made later number higher.
struct Marker : autograd::Node {
  const char* name() const override { return "FsdpMarker"; }
  std::vector<Tensor> apply(const Tensor&, const std::vector<bool>&) override { return {}; }
};

/// Passes the gradient through, gathering the module's parameters first (its backward follows).
struct PreBackward : autograd::Node {
  std::weak_ptr<FsdpState> state;
  const char* name() const override { return "FsdpPreBackward"; }
  std::vector<Tensor> apply(const Tensor& grad, const std::vector<bool>&) override {
    if (auto s = state.lock()) s->pre_backward();
    return {grad};
  }
};

}  // namespace

FsdpState::FsdpState(ProcessGroup group, FullyShardOptions options,
                     std::vector<ShardedParam> params)
    : group_(std::move(group)), options_(std::move(options)), params_(std::move(params)) {}

Shape FsdpState::shard_shape(const ShardedParam& p, int64_t rows) const {
  Shape s = p.full_shape.empty() ? Shape{1} : p.full_shape;
  s[0] = rows;
  return s;
}

DType FsdpState::compute_dtype(const ShardedParam& p) const {
  return options_.mp_policy.param_dtype.value_or(p.master_dtype);
}

void FsdpState::shard_parameters() {
  NoGradGuard no_grad;
  const int64_t n = group_.size(), me = group_.rank();
  for (ShardedParam& p : params_) {
    const int64_t d0 = p.full_shape.empty() ? 1 : p.full_shape[0];
    Tensor full = p.param.detach().reshape(shard_shape(p, d0));
    p.inner = d0 == 0 ? 0 : full.numel() / d0;
    p.rows = (d0 + n - 1) / n;
    p.shard = zeros(shard_shape(p, p.rows), {.dtype = p.master_dtype, .device = full.device()});
    const int64_t lo = std::min(d0, me * p.rows), hi = std::min(d0, (me + 1) * p.rows);
    if (hi > lo) p.shard.slice0(0, hi - lo).copy_(full.slice0(lo, hi));
    point_at(p.param, p.shard);
    p.param.impl().grad = nullptr;
  }
  make_buckets();
}

void FsdpState::make_buckets() {
  for (size_t i = 0; i < params_.size(); ++i) {
    ShardedParam& p = params_[i];
    const DType compute = compute_dtype(p);
    const DType reduce = options_.mp_policy.reduce_dtype.value_or(p.master_dtype);
    size_t b = 0;
    while (b < buckets_.size() && (buckets_[b].compute != compute || buckets_[b].reduce != reduce))
      ++b;
    if (b == buckets_.size()) buckets_.push_back({.compute = compute, .reduce = reduce});
    p.bucket = b;
    p.offset = buckets_[b].total;
    buckets_[b].total += p.rows * p.inner;
    buckets_[b].params.push_back(i);
  }
}

void FsdpState::unshard_async() {
  if (gathered_ || gathering_) return;
  NoGradGuard no_grad;
  const int64_t n = group_.size();
  const Device device = params_.empty() ? cpu() : params_.front().shard.device();
  for (Bucket& b : buckets_) {
    Tensor chunk = empty({b.total}, {.dtype = b.compute, .device = device});
    for (size_t i : b.params) {
      const ShardedParam& p = params_[i];
      chunk.slice0(p.offset, p.offset + p.rows * p.inner)
          .copy_(p.shard.reshape({p.rows * p.inner}));
    }
    b.gathered = empty({n * b.total}, {.dtype = b.compute, .device = device});
    b.gather = group_.all_gather_into_tensor_async(b.gathered, chunk);
  }
  gathering_ = true;
}

void FsdpState::copy_out(ShardedParam& p, const Bucket& b) {
  const int64_t n = group_.size(), rows = p.rows * p.inner;
  Tensor flat = empty({n * rows}, {.dtype = b.compute, .device = b.gathered.device()});
  for (int64_t j = 0; j < n; ++j)
    flat.slice0(j * rows, (j + 1) * rows)
        .copy_(b.gathered.slice0(j * b.total + p.offset, j * b.total + p.offset + rows));
  p.gathered = flat.reshape(shard_shape(p, p.rows * n));
}

void FsdpState::wait_unshard() {
  if (gathered_) return;
  unshard_async();
  NoGradGuard no_grad;
  for (Bucket& b : buckets_) b.gather.wait();
  for (ShardedParam& p : params_) {
    copy_out(p, buckets_[p.bucket]);
    const int64_t d0 = p.full_shape.empty() ? 1 : p.full_shape[0];
    Tensor full = p.gathered.slice0(0, d0).reshape(p.full_shape);
    p.stash_grad = p.param.grad();
    p.param.impl().grad = nullptr;
    point_at(p.param, full);
  }
  for (Bucket& b : buckets_) {
    b.gather = Work();
    b.gathered = Tensor();
  }
  gathering_ = false;
  gathered_ = true;
}

void FsdpState::reshard() {
  if (gathering_) wait_unshard();
  if (!gathered_) return;
  for (ShardedParam& p : params_) {
    point_at(p.param, p.shard);
    p.param.impl().grad = p.stash_grad.defined() ? p.stash_grad.impl_ptr() : nullptr;
    p.stash_grad = Tensor();
    p.gathered = Tensor();
  }
  gathered_ = false;
}

void FsdpState::pre_forward(std::vector<Tensor>& args) {
  wait_unshard();
  for (auto& weak : forward_prefetch)
    if (auto s = weak.lock()) s->unshard_async();
  forward_start_ = Marker().sequence_nr;
  const auto& mp = options_.mp_policy;
  if (mp.param_dtype && mp.cast_forward_inputs)
    for (Tensor& a : args)
      if (a.defined() && a.dtype() == DType::Float32) a = a.to(*mp.param_dtype);
}

int FsdpState::count_leaf_edges(const Tensor& output) const {
  std::unordered_set<const TensorImpl*> mine;
  for (const ShardedParam& p : params_) mine.insert(p.param.impl_ptr().get());
  std::unordered_set<const autograd::Node*> seen;
  std::vector<autograd::Node*> stack;
  if (output.grad_fn()) stack.push_back(output.grad_fn().get());
  int count = 0;
  while (!stack.empty()) {
    autograd::Node* n = stack.back();
    stack.pop_back();
    if (n->sequence_nr < forward_start_ || !seen.insert(n).second) continue;
    for (const autograd::Edge& e : n->next_edges) {
      if (e.leaf && mine.count(e.leaf.get())) ++count;
      if (e.node) stack.push_back(e.node.get());
    }
  }
  return count;
}

void FsdpState::post_forward(Tensor& output) {
  const auto& mp = options_.mp_policy;
  if (mp.output_dtype && output.defined() && output.dtype() != *mp.output_dtype)
    output = output.to(*mp.output_dtype);
  if (output.defined() && autograd::needs_grad(output) && output.grad_fn()) {
    pending_ += count_leaf_edges(output);
    auto node = std::make_shared<PreBackward>();
    node->state = weak_from_this();
    output = autograd::attach(output.detach(), node, {output});
  }
  if (options_.reshard_after_forward) reshard();
}

void FsdpState::pre_backward() {
  wait_unshard();
  for (auto& weak : backward_prefetch)
    if (auto s = weak.lock()) s->unshard_async();
}

void FsdpState::accumulated() {
  if (pending_ > 0 && --pending_ == 0) post_backward();
}

void FsdpState::post_backward() {
  pending_ = 0;
  NoGradGuard no_grad;
  const int64_t n = group_.size();
  std::vector<Tensor> grads;
  for (ShardedParam& p : params_) {
    Tensor g = p.param.grad();
    p.param.impl().grad = nullptr;
    if (!g.defined())
      g = zeros(p.full_shape, {.dtype = compute_dtype(p), .device = p.shard.device()});
    if (p.full_grad.defined()) g = add(p.full_grad, g.to(p.full_grad.dtype()));
    grads.push_back(g);
  }
  if (!sync) {
    for (size_t i = 0; i < params_.size(); ++i) params_[i].full_grad = grads[i];
    if (reshard_after_backward) reshard();
    return;
  }
  std::vector<Tensor> outs;
  std::vector<Work> works;
  for (Bucket& b : buckets_) {
    // Member j's chunk: rows [j rows, (j + 1) rows) of each parameter's gradient, zero-padded.
    Tensor padded = zeros({n * b.total}, {.dtype = b.reduce, .device = params_[0].shard.device()});
    for (size_t i : b.params) {
      ShardedParam& p = params_[i];
      p.full_grad = Tensor();
      const int64_t d0 = p.full_shape.empty() ? 1 : p.full_shape[0];
      Tensor g = grads[i].reshape({d0 * p.inner});
      for (int64_t j = 0; j < n; ++j) {
        const int64_t lo = std::min(d0, j * p.rows) * p.inner;
        const int64_t hi = std::min(d0, (j + 1) * p.rows) * p.inner;
        const int64_t at = j * b.total + p.offset;
        if (hi > lo) padded.slice0(at, at + hi - lo).copy_(g.slice0(lo, hi));
      }
    }
    outs.push_back(empty({b.total}, {.dtype = b.reduce, .device = padded.device()}));
    works.push_back(group_.reduce_scatter_tensor_async(outs.back(), padded, ReduceOp::Avg));
  }
  for (size_t k = 0; k < buckets_.size(); ++k) {
    works[k].wait();
    for (size_t i : buckets_[k].params) {
      ShardedParam& p = params_[i];
      Tensor g = empty(p.shard.shape(), {.dtype = p.master_dtype, .device = p.shard.device()});
      g.copy_(outs[k].slice0(p.offset, p.offset + p.rows * p.inner).reshape(p.shard.shape()));
      p.stash_grad = p.stash_grad.defined() ? add(p.stash_grad, g) : g;
    }
  }
  if (reshard_after_backward) reshard();
}

void FsdpState::reduce_grad() {
  wait_unshard();
  const bool was_sync = sync, was_reshard = reshard_after_backward;
  sync = true;
  reshard_after_backward = false;
  post_backward();
  sync = was_sync;
  reshard_after_backward = was_reshard;
}

}  // namespace tensorplay::distributed::fsdp::detail
