// Row-parallel Linear: sharded weight columns, the partial products summed (or reduce-scattered)
// after it, then the bias.
#include "tensorplay/distributed/tensor_parallel/rowwise_parallel.h"

#include <memory>
#include <stdexcept>
#include <vector>

#include "tensorplay/core/ops/elementwise.h"
#include "tensorplay/distributed/tensor_parallel/detail/shard.h"
#include "tensorplay/distributed/tensor_parallel/functional.h"
#include "tensorplay/nn/embedding.h"
#include "tensorplay/nn/linear.h"

namespace tensorplay::distributed::tensor_parallel {
namespace {

// The output of a row-parallel layer: the partial results summed (or reduce-scattered).
Tensor combine(const Tensor& partial, const Placement& out, const ProcessGroup& tp) {
  if (const auto* shard = std::get_if<Shard>(&out)) return reduce_scatter(partial, shard->dim, tp);
  return reduce_from_parallel_region(partial, tp);
}

// A vocabulary-parallel Embedding: rank r keeps rows [r num/tp, (r+1) num/tp); ids outside them
// look up row 0 and are masked to zero, and the partial lookups are summed.
void apply_embedding(nn::EmbeddingImpl& embedding, const Placement& out, const ProcessGroup& tp) {
  // A table tied to a head already split by ColwiseParallel is that shard already.
  if (embedding.weight.size(0) == embedding.num)
    detail::shard_in_place(embedding.weight, 0, tp.rank(), tp.size());
  const int64_t rows = embedding.num / tp.size(), first = tp.rank() * rows;
  embedding.num = rows;
  auto mask = std::make_shared<Tensor>();  // set by the pre-hook, read by the hook
  embedding.register_forward_pre_hook([first, rows, mask](const std::vector<Tensor>& args) {
    const Tensor& ids = args.at(0);
    std::vector<float> local = ids.detach().to(Device()).to_vector(), keep(local.size());
    for (size_t i = 0; i < local.size(); ++i) {
      const auto id = static_cast<int64_t>(local[i]);
      keep[i] = id >= first && id < first + rows ? 1.0f : 0.0f;
      local[i] = keep[i] != 0.0f ? static_cast<float>(id - first) : 0.0f;
    }
    Shape mask_shape = ids.shape();
    mask_shape.push_back(1);
    *mask = from_vector(keep, mask_shape).to(ids.device());
    std::vector<Tensor> in = args;
    in.at(0) = from_vector(local, ids.shape()).to(ids.device());
    return in;
  });
  embedding.register_forward_hook([tp, out, mask](const Tensor& partial) {
    Tensor masked =
        partial * (mask->dtype() == partial.dtype() ? *mask : mask->to(partial.dtype()));
    return combine(masked, out, tp);
  });
}

}  // namespace

std::string RowwiseParallel::describe() const {
  return "RowwiseParallel(input_layouts=" + to_string(options_.input_layouts) +
         ", output_layouts=" + to_string(options_.output_layouts) +
         ", use_local_output=" + (options_.use_local_output ? "true" : "false") + ")";
}

void RowwiseParallel::check(const nn::Module& module, const std::string& path,
                            const ProcessGroup& tp) const {
  const char* style = "RowwiseParallel";
  if (!options_.use_local_output)
    throw std::invalid_argument(
        "RowwiseParallel: use_local_output=false asks for a DTensor output at '" + path +
        "', which tensorplay does not have; leave it true");
  if (const auto* in = std::get_if<Shard>(&options_.input_layouts); in != nullptr && in->dim != -1)
    throw std::invalid_argument("RowwiseParallel: '" + path + "' input_layouts " + to_string(*in) +
                                ": the input is sharded along its last dimension, Shard(-1)");
  if (const auto* embedding = dynamic_cast<const nn::EmbeddingImpl*>(&module)) {
    detail::check_divides(embedding->num, tp.size(), path, style, "embeddings (rows)");
    return;
  }
  const auto& linear =
      detail::module_as<nn::LinearImpl>(module, path, style, "Linear or an Embedding");
  detail::check_divides(linear.in_features, tp.size(), path, style, "input features");
}

void RowwiseParallel::apply(nn::Module& module, const std::string& path,
                            const ProcessGroup& tp) const {
  check(module, path, tp);
  if (auto* embedding = dynamic_cast<nn::EmbeddingImpl*>(&module)) {
    apply_embedding(*embedding, options_.output_layouts, tp);
    return;
  }
  auto& linear = dynamic_cast<nn::LinearImpl&>(module);
  detail::shard_in_place(linear.weight, 1, tp.rank(), tp.size());
  linear.in_features /= tp.size();
  // The Linear computes without its bias; the hook adds it after the sum, once.
  Tensor bias = linear.bias;
  linear.bias = Tensor();
  if (std::holds_alternative<Replicate>(options_.input_layouts))
    module.register_forward_pre_hook([tp](const std::vector<Tensor>& args) {
      std::vector<Tensor> out = args;
      out.at(0) = scatter_to_parallel_region(args.at(0), -1, tp);
      return out;
    });
  const Placement out = options_.output_layouts;
  module.register_forward_hook([tp, out, bias](const Tensor& partial) {
    Tensor y = combine(partial, out, tp);
    if (!bias.defined()) return y;
    // On sequence shards each rank sees its own positions: the bias's gradient is summed.
    return y + (std::holds_alternative<Shard>(out) ? copy_to_parallel_region(bias, tp) : bias);
  });
}

}  // namespace tensorplay::distributed::tensor_parallel
