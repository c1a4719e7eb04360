// Gathering the split tensors of a state dict.
#include "tensorplay/distributed/tensor_parallel/full_state_dict.h"

#include <vector>

#include "tensorplay/core/ops/shape_ops.h"
#include "tensorplay/distributed/tensor_parallel/detail/shard.h"
#include "tensorplay/distributed/tensor_parallel/detail/tp_collectives.h"

namespace tensorplay::distributed::tensor_parallel {
namespace {

// The whole tensor from every rank's piece: part p of the whole is the ranks' parts p in order.
Tensor reassemble(const std::vector<Tensor>& pieces, const detail::ShardSpec& spec) {
  std::vector<Tensor> ordered;
  for (int64_t p = 0; p < spec.packed; ++p)
    for (const Tensor& piece : pieces) {
      const int64_t part = piece.size(spec.dim) / spec.packed;
      ordered.push_back(narrow(piece, spec.dim, p * part, part));
    }
  return cat(ordered, spec.dim);
}

}  // namespace

StateDict full_state_dict(const nn::Module& module, const ProcessGroup& tp) {
  StateDict out;
  for (const auto& [name, detached] : module.state_dict()) {
    const auto spec = detail::shard_spec_of(module.find_tensor(name));
    if (!spec || spec->count != tp.size()) {
      out.insert(name, detached);
      continue;
    }
    out.insert(name, reassemble(detail::all_gather_pieces(tp, detached), *spec));
  }
  return out;
}

void load_full_state_dict(nn::Module& module, const StateDict& full, const ProcessGroup& tp) {
  StateDict local;
  for (const auto& [name, whole] : full) {
    const Tensor here = module.find_tensor(name);
    const auto spec = here.defined() ? detail::shard_spec_of(here) : std::nullopt;
    if (!spec || spec->count != tp.size() || whole.shape() == here.shape()) {
      local.insert(name, whole);
      continue;
    }
    Tensor share = clone(whole);
    detail::shard_in_place(share, spec->dim, tp.rank(), spec->count, spec->packed);
    local.insert(name, share);
  }
  module.load_state_dict(local);
}

}  // namespace tensorplay::distributed::tensor_parallel
