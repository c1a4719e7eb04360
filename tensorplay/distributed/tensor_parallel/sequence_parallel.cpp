// Sequence-parallel norms: the weights entering the forward through copy_to_parallel_region, so
// their gradients are summed across the group.
#include "tensorplay/distributed/tensor_parallel/sequence_parallel.h"

#include <stdexcept>
#include <vector>

#include "tensorplay/distributed/tensor_parallel/functional.h"
#include "tensorplay/nn/layer_norm.h"
#include "tensorplay/nn/rms_norm.h"

namespace tensorplay::distributed::tensor_parallel {
namespace {

// For the forward, each of `members` (a module's weight handles) is swapped for its copy into
// the parallel region (identity forward, all-reduce backward); afterwards the parameters are
// put back. The registered parameters never change.
void route_through_region(nn::Module& module, std::vector<Tensor*> members,
                          const ProcessGroup& tp) {
  auto saved = std::make_shared<std::vector<Tensor>>();
  module.register_forward_pre_hook([members, saved, tp](const std::vector<Tensor>& args) {
    saved->clear();
    for (Tensor* m : members) {
      saved->push_back(*m);
      if (m->defined()) *m = copy_to_parallel_region(*m, tp);
    }
    return args;
  });
  module.register_forward_hook([members, saved](const Tensor& y) {
    for (size_t i = 0; i < members.size() && i < saved->size(); ++i) *members[i] = (*saved)[i];
    return y;
  });
}

}  // namespace

std::string SequenceParallel::describe() const {
  return "SequenceParallel(sequence_dim=" + std::to_string(sequence_dim_) + ")";
}

void SequenceParallel::check(const nn::Module& module, const std::string& path,
                             const ProcessGroup&) const {
  if (dynamic_cast<const nn::LayerNormImpl*>(&module) != nullptr ||
      dynamic_cast<const nn::RMSNormImpl*>(&module) != nullptr || module.parameters().empty())
    return;
  throw std::invalid_argument("SequenceParallel: '" + path + "' is a " + module.type_name() +
                              " with parameters; the style runs a LayerNorm, an RMSNorm or a "
                              "module without parameters (dropout) on sequence shards");
}

void SequenceParallel::apply(nn::Module& module, const std::string& path,
                             const ProcessGroup& tp) const {
  check(module, path, tp);
  if (auto* norm = dynamic_cast<nn::LayerNormImpl*>(&module))
    route_through_region(module, {&norm->weight, &norm->bias}, tp);
  else if (auto* rms = dynamic_cast<nn::RMSNormImpl*>(&module))
    route_through_region(module, {&rms->weight}, tp);
}

}  // namespace tensorplay::distributed::tensor_parallel
