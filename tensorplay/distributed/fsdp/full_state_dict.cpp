// full_state_dict and load_full_state_dict: the sharded parameters gathered from (or cut into)
// this rank's rows, the rest copied.
#include "tensorplay/distributed/fsdp/full_state_dict.h"

#include <stdexcept>

#include "tensorplay/distributed/fsdp/detail/fsdp_state.h"
#include "tensorplay/tensor.h"

namespace tensorplay::distributed::fsdp {

using detail::sharded_param_of;

namespace {

/// The whole parameter gathered from the members' master shards.
Tensor gather_whole(const detail::FsdpState& state, const detail::ShardedParam& p) {
  const ProcessGroup& group = state.group();
  const int64_t n = group.size();
  Tensor chunk = p.shard.reshape({p.rows * p.inner});
  Tensor all = empty({n * p.rows * p.inner}, {.dtype = p.master_dtype, .device = p.shard.device()});
  group.all_gather_into_tensor(all, chunk);
  const int64_t d0 = p.full_shape.empty() ? 1 : p.full_shape[0];
  Tensor whole = empty(p.full_shape, {.dtype = p.master_dtype, .device = p.shard.device()});
  whole.copy_(all.slice0(0, d0 * p.inner).reshape(p.full_shape));
  return whole;
}

void check_resharded(const detail::FsdpState& state, const std::string& name, const char* what) {
  if (state.gathered())
    throw std::invalid_argument(std::string(what) + ": '" + name +
                                "' is gathered now; call it between steps (or reshard() first)");
}

}  // namespace

StateDict full_state_dict(const nn::Module& root) {
  NoGradGuard no_grad;
  StateDict out;
  for (const auto& [name, view] : root.state_dict()) {
    const Tensor t = root.find_tensor(name);
    auto [state, p] = sharded_param_of(t.impl_ptr().get());
    if (!state) {
      out.insert(name, view.clone().detach());
      continue;
    }
    check_resharded(*state, name, "full_state_dict");
    out.insert(name, gather_whole(*state, *p));
  }
  return out;
}

void load_full_state_dict(nn::Module& root, const StateDict& full) {
  NoGradGuard no_grad;
  for (const auto& [name, view] : root.state_dict()) {
    const Tensor* src = full.find(name);
    if (!src) throw std::invalid_argument("load_full_state_dict: the dict has no '" + name + "'");
    Tensor t = root.find_tensor(name);
    auto [state, p] = sharded_param_of(t.impl_ptr().get());
    const Shape want = state ? p->full_shape : t.shape();
    if (src->shape() != want)
      throw std::invalid_argument("load_full_state_dict: '" + name + "' has shape " +
                                  to_string(src->shape()) + " in the dict, " + to_string(want) +
                                  " in the module");
    if (!state) {
      t.copy_(*src);
      continue;
    }
    check_resharded(*state, name, "load_full_state_dict");
    const int64_t d0 = p->full_shape.empty() ? 1 : p->full_shape[0];
    const int64_t me = state->group().rank();
    const int64_t lo = std::min(d0, me * p->rows), hi = std::min(d0, (me + 1) * p->rows);
    Tensor rows = src->detach().reshape({d0, p->inner});
    p->shard.zero_();
    Tensor dst = p->shard.reshape({p->rows, p->inner});
    if (hi > lo) dst.slice0(0, hi - lo).copy_(rows.slice0(lo, hi));
  }
}

}  // namespace tensorplay::distributed::fsdp
