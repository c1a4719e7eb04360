// Gathering and cutting the per-parameter state of an optimizer over a split model.
#include "tensorplay/distributed/tensor_parallel/optimizer_state.h"

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensorplay/core/ops/shape_ops.h"
#include "tensorplay/distributed/tensor_parallel/detail/shard.h"
#include "tensorplay/distributed/tensor_parallel/detail/tp_collectives.h"

namespace tensorplay::distributed::tensor_parallel {
namespace {

// The parameter a "state.<i>.<name>" key belongs to, or nothing for another key.
std::optional<size_t> parameter_of(const std::string& key, size_t count) {
  if (!key.starts_with("state.")) return std::nullopt;
  const size_t dot = key.find('.', 6);
  if (dot == std::string::npos) return std::nullopt;
  size_t i = 0;
  try {
    i = std::stoul(key.substr(6, dot - 6));
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return i < count ? std::optional<size_t>(i) : std::nullopt;
}

// The split of parameter `i` over `tp`, or nothing when it is whole (or split over another group).
std::optional<detail::ShardSpec> split_of(const optim::Optimizer& optimizer, size_t i,
                                          const ProcessGroup& tp) {
  const auto spec = detail::shard_spec_of(optimizer.parameters()[i]);
  if (!spec || spec->count != tp.size()) return std::nullopt;
  return spec;
}

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

StateDict full_optimizer_state_dict(const optim::Optimizer& optimizer, const ProcessGroup& tp) {
  StateDict out;
  const auto& params = optimizer.parameters();
  for (const auto& [key, value] : optimizer.state_dict()) {
    const auto i = parameter_of(key, params.size());
    const auto spec = i ? split_of(optimizer, *i, tp) : std::nullopt;
    if (!spec || value.shape() != params[*i].shape()) {
      out.insert(key, value);
      continue;
    }
    out.insert(key, reassemble(detail::all_gather_pieces(tp, value), *spec));
  }
  return out;
}

void load_full_optimizer_state_dict(optim::Optimizer& optimizer, const StateDict& full,
                                    const ProcessGroup& tp) {
  StateDict local;
  const auto& params = optimizer.parameters();
  for (const auto& [key, value] : full) {
    const auto i = parameter_of(key, params.size());
    const auto spec = i ? split_of(optimizer, *i, tp) : std::nullopt;
    if (!spec || value.dim() == 0 || value.shape() == params[*i].shape()) {
      local.insert(key, value);
      continue;
    }
    Shape whole = params[*i].shape();
    whole[spec->dim] *= spec->count;
    if (value.shape() != whole)
      throw std::invalid_argument("load_full_optimizer_state_dict: '" + key + "' has shape " +
                                  to_string(value.shape()) + ", but its parameter is " +
                                  to_string(whole) + " whole and " + to_string(params[*i].shape()) +
                                  " split over tp: load the state of the same model");
    Tensor share = clone(value);
    detail::shard_in_place(share, spec->dim, tp.rank(), spec->count, spec->packed);
    local.insert(key, share);
  }
  optimizer.load_state_dict(local);
}

}  // namespace tensorplay::distributed::tensor_parallel
