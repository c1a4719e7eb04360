// Redistribution at a module's edges.
#include "tensorplay/distributed/tensor_parallel/prepare_module.h"

#include <stdexcept>
#include <vector>

#include "tensorplay/distributed/tensor_parallel/functional.h"

namespace tensorplay::distributed::tensor_parallel {
namespace {

void check_pair(const Placement& from, const Placement& to, const std::string& path,
                const char* style) {
  const auto* a = std::get_if<Shard>(&from);
  const auto* b = std::get_if<Shard>(&to);
  if (a != nullptr && b != nullptr && a->dim != b->dim)
    throw std::invalid_argument(std::string(style) + ": '" + path + "' from " + to_string(from) +
                                " to " + to_string(to) +
                                ": a shard cannot move to another dimension; go through "
                                "Replicate()");
}

}  // namespace

Tensor redistribute(const Tensor& x, const Placement& from, const Placement& to,
                    const ProcessGroup& tp) {
  check_pair(from, to, "<tensor>", "redistribute");
  if (from == to) return x;
  if (const auto* shard = std::get_if<Shard>(&to))
    return scatter_to_parallel_region(x, shard->dim, tp);
  return gather_from_parallel_region(x, std::get<Shard>(from).dim, tp);
}

std::string PrepareModuleInput::describe() const {
  return "PrepareModuleInput(input_layouts=" + to_string(options_.input_layouts) +
         ", desired_input_layouts=" + to_string(options_.desired_input_layouts) + ")";
}

void PrepareModuleInput::check(const nn::Module&, const std::string& path,
                               const ProcessGroup&) const {
  check_pair(options_.input_layouts, options_.desired_input_layouts, path, "PrepareModuleInput");
}

void PrepareModuleInput::apply(nn::Module& module, const std::string& path,
                               const ProcessGroup& tp) const {
  check(module, path, tp);
  const PrepareModuleInputOptions o = options_;
  module.register_forward_pre_hook([o, tp](const std::vector<Tensor>& args) {
    std::vector<Tensor> in = args;
    in.at(0) = redistribute(args.at(0), o.input_layouts, o.desired_input_layouts, tp);
    return in;
  });
}

std::string PrepareModuleOutput::describe() const {
  return "PrepareModuleOutput(output_layouts=" + to_string(options_.output_layouts) +
         ", desired_output_layouts=" + to_string(options_.desired_output_layouts) + ")";
}

void PrepareModuleOutput::check(const nn::Module&, const std::string& path,
                                const ProcessGroup&) const {
  check_pair(options_.output_layouts, options_.desired_output_layouts, path, "PrepareModuleOutput");
}

void PrepareModuleOutput::apply(nn::Module& module, const std::string& path,
                                const ProcessGroup& tp) const {
  check(module, path, tp);
  const PrepareModuleOutputOptions o = options_;
  module.register_forward_hook([o, tp](const Tensor& y) {
    return redistribute(y, o.output_layouts, o.desired_output_layouts, tp);
  });
}

}  // namespace tensorplay::distributed::tensor_parallel
