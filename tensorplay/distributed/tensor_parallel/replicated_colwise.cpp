// A whole Linear whose output each rank narrows to its piece, its gradient summed first.
#include "tensorplay/distributed/tensor_parallel/replicated_colwise.h"

#include <stdexcept>
#include <vector>

#include "tensorplay/core/ops/shape_ops.h"
#include "tensorplay/distributed/tensor_parallel/detail/shard.h"
#include "tensorplay/distributed/tensor_parallel/functional.h"
#include "tensorplay/nn/linear.h"

namespace tensorplay::distributed::tensor_parallel {

std::string ReplicatedColwise::describe() const {
  return "ReplicatedColwise(pieces=" + std::to_string(pieces_) +
         ", input_layouts=" + to_string(input_layouts_) + ")";
}

void ReplicatedColwise::check(const nn::Module& module, const std::string& path,
                              const ProcessGroup& tp) const {
  const char* style = "ReplicatedColwise";
  const auto& linear = detail::module_as<nn::LinearImpl>(module, path, style, "Linear");
  if (pieces_ < 1 || tp.size() % pieces_ != 0)
    throw std::invalid_argument("ReplicatedColwise: '" + path + "' is cut in " +
                                std::to_string(pieces_) + " pieces, which must divide the " +
                                std::to_string(tp.size()) + " ranks");
  detail::check_divides(linear.out_features, pieces_, path, style, "output features");
}

void ReplicatedColwise::apply(nn::Module& module, const std::string& path,
                              const ProcessGroup& tp) const {
  check(module, path, tp);
  const auto& linear = dynamic_cast<const nn::LinearImpl&>(module);
  const int64_t width = linear.out_features / pieces_;
  const int64_t start = tp.rank() / (tp.size() / pieces_) * width;
  if (const auto* shard = std::get_if<Shard>(&input_layouts_))
    module.register_forward_pre_hook([tp, dim = shard->dim](const std::vector<Tensor>& args) {
      std::vector<Tensor> in = args;
      in.at(0) = gather_from_parallel_region(args.at(0), dim, tp);
      return in;
    });
  module.register_forward_hook([tp, start, width](const Tensor& y) {
    return narrow(copy_to_parallel_region(y, tp), -1, start, width);
  });
}

}  // namespace tensorplay::distributed::tensor_parallel
