// Column-parallel Linear: sharded weight rows, a copy (or all-gather) in front, the local output.
#include "tensorplay/distributed/tensor_parallel/colwise_parallel.h"

#include <stdexcept>
#include <vector>

#include "tensorplay/distributed/tensor_parallel/detail/shard.h"
#include "tensorplay/distributed/tensor_parallel/functional.h"
#include "tensorplay/nn/linear.h"

namespace tensorplay::distributed::tensor_parallel {

std::string ColwiseParallel::describe() const {
  return "ColwiseParallel(input_layouts=" + to_string(options_.input_layouts) +
         ", output_layouts=" + to_string(options_.output_layouts) +
         ", use_local_output=" + (options_.use_local_output ? "true" : "false") +
         ", packed=" + std::to_string(options_.packed) +
         (options_.keep_input_shard ? ", keep_input_shard=true" : "") + ")";
}

void ColwiseParallel::check(const nn::Module& module, const std::string& path,
                            const ProcessGroup& tp) const {
  const char* style = "ColwiseParallel";
  const auto& linear = detail::module_as<nn::LinearImpl>(module, path, style, "Linear");
  if (!options_.use_local_output)
    throw std::invalid_argument(
        "ColwiseParallel: use_local_output=false asks for a DTensor output at '" + path +
        "', which tensorplay does not have; leave it true");
  if (options_.packed < 1)
    throw std::invalid_argument("ColwiseParallel: packed must be at least 1 at '" + path + "'");
  if (const auto* out = std::get_if<Shard>(&options_.output_layouts);
      out != nullptr && out->dim != -1)
    throw std::invalid_argument("ColwiseParallel: '" + path + "' output_layouts " +
                                to_string(*out) +
                                ": the output is sharded along its last dimension, Shard(-1)");
  if (options_.keep_input_shard && !std::holds_alternative<Shard>(options_.input_layouts))
    throw std::invalid_argument("ColwiseParallel: '" + path +
                                "' keep_input_shard needs input_layouts Shard(d)");
  if (options_.packed > 1 && std::holds_alternative<Replicate>(options_.output_layouts))
    throw std::invalid_argument("ColwiseParallel: '" + path +
                                "' with packed > 1 keeps its output sharded (Shard(-1))");
  detail::check_divides(
      linear.out_features, tp.size() * options_.packed, path, style,
      options_.packed > 1 ? "output features (times packed parts)" : "output features");
}

void ColwiseParallel::apply(nn::Module& module, const std::string& path,
                            const ProcessGroup& tp) const {
  check(module, path, tp);
  auto& linear = dynamic_cast<nn::LinearImpl&>(module);
  const int64_t n = tp.size(), r = tp.rank();
  // A weight tied to a table already split by rows (a vocabulary-parallel embedding) is that
  // shard already.
  if (linear.weight.size(0) == linear.out_features)
    detail::shard_in_place(linear.weight, 0, r, n, options_.packed);
  if (linear.bias.defined()) detail::shard_in_place(linear.bias, 0, r, n, options_.packed);
  linear.out_features /= n;
  const Placement in = options_.input_layouts;
  module.register_forward_pre_hook([tp, in](const std::vector<Tensor>& args) {
    std::vector<Tensor> out = args;
    if (const auto* shard = std::get_if<Shard>(&in))
      out.at(0) = all_gather(args.at(0), shard->dim, tp);
    else
      out.at(0) = copy_to_parallel_region(args.at(0), tp);
    return out;
  });
  // The hooks run inside the recomputed forward, so the backward gathers the shard again.
  if (options_.keep_input_shard) module.set_checkpointed(true);
  if (std::holds_alternative<Replicate>(options_.output_layouts))
    module.register_forward_hook(
        [tp](const Tensor& y) { return gather_from_parallel_region(y, -1, tp); });
}

}  // namespace tensorplay::distributed::tensor_parallel
