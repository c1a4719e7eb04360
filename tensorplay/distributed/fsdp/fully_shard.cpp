// fully_shard: checks the module and the group, builds the module's sharding state, shards its
// parameters and installs the hooks around its forward; FSDPModule's calls; clip_grad_norm.
#include "tensorplay/distributed/fsdp/fully_shard.h"

#include <cmath>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>

#include "tensorplay/distributed/fsdp/detail/fsdp_state.h"
#include "tensorplay/tensor.h"

namespace tensorplay::distributed::fsdp {

using detail::FsdpState;
using detail::ShardedParam;

namespace {

/// Modules sharded and parameters held by a sharding state, in this process.
std::mutex registry_mutex;
std::map<const nn::Module*, std::weak_ptr<FsdpState>> module_states;
std::map<const TensorImpl*, std::weak_ptr<FsdpState>> sharded_params;

bool held(const TensorImpl* impl) {
  auto it = sharded_params.find(impl);
  return it != sharded_params.end() && !it->second.expired();
}

/// The module's parameters not held by a sharded submodule, checked on one device.
std::vector<ShardedParam> own_parameters(nn::Module& module) {
  std::lock_guard lock(registry_mutex);
  if (auto it = module_states.find(&module); it != module_states.end() && !it->second.expired())
    throw std::invalid_argument("fully_shard: the module (" + module.type_name() +
                                ") is already sharded; apply fully_shard once per module");
  std::vector<ShardedParam> out;
  for (auto& [name, t] : module.named_parameters()) {
    if (held(t.impl_ptr().get())) continue;
    if (!out.empty() && out.front().param.device() != t.device())
      throw std::invalid_argument("fully_shard: parameters on mixed devices: '" + out.front().name +
                                  "' on " + to_string(out.front().param.device()) + ", '" + name +
                                  "' on " + to_string(t.device()) +
                                  "; move the module to one device (module->to(device)) first");
    ShardedParam p;
    p.name = name;
    p.param = t;
    p.full_shape = t.shape();
    p.master_dtype = t.dtype();
    out.push_back(std::move(p));
  }
  return out;
}

/// The members' parameter names and shapes and group, compared: the same error on every member.
void check_members_agree(const ProcessGroup& group, const std::vector<ShardedParam>& params) {
  std::string mine = "group " + std::to_string(group.size()) + ":";
  for (int r : group.ranks()) mine += " " + std::to_string(r);
  for (const ShardedParam& p : params) mine += "\n" + p.name + " " + to_string(p.full_shape);
  std::vector<std::string> all;
  try {
    all = group.all_gather_bytes(mine);
  } catch (const DistributedError& e) {
    throw DistributedError(std::string("fully_shard: ") + e.what() +
                           " (does every member of the group call fully_shard on this module "
                           "with the same group?)");
  }
  for (size_t j = 1; j < all.size(); ++j)
    if (all[j] != all[0])
      throw DistributedError("fully_shard: member " + std::to_string(j) + " (rank " +
                             std::to_string(group.ranks()[j]) +
                             ") shards another group or other parameters than member 0 (rank " +
                             std::to_string(group.ranks()[0]) + "):\n" + all[j] + "\nagainst\n" +
                             all[0] + "\nevery member shards the same module over the same group");
}

}  // namespace

namespace detail {

std::pair<std::shared_ptr<FsdpState>, ShardedParam*> sharded_param_of(const TensorImpl* impl) {
  std::shared_ptr<FsdpState> state;
  {
    std::lock_guard lock(registry_mutex);
    auto it = sharded_params.find(impl);
    if (it != sharded_params.end()) state = it->second.lock();
  }
  if (!state) return {nullptr, nullptr};
  for (ShardedParam& p : state->params())
    if (p.param.impl_ptr().get() == impl) return {state, &p};
  return {nullptr, nullptr};
}

}  // namespace detail

FSDPModule fully_shard(const std::shared_ptr<nn::Module>& module, FullyShardOptions options) {
  if (!module) throw std::invalid_argument("fully_shard: the module is null");
  if (options.mesh.rank() < 0)
    throw std::invalid_argument("fully_shard: rank " + std::to_string(options.mesh.global_rank()) +
                                " is not a member of the group given as mesh; pass this rank's "
                                "dp group (mesh[\"dp\"])");
  std::vector<ShardedParam> params = own_parameters(*module);
  check_members_agree(options.mesh, params);
  ProcessGroup group = options.mesh;
  auto state = std::make_shared<FsdpState>(group, std::move(options), std::move(params));
  state->shard_parameters();
  {
    std::lock_guard lock(registry_mutex);
    module_states[module.get()] = state;
    for (ShardedParam& p : state->params()) sharded_params[p.param.impl_ptr().get()] = state;
  }
  std::weak_ptr<FsdpState> weak = state;
  for (ShardedParam& p : state->params())
    p.param.register_post_accumulate_grad_hook([weak](const Tensor&) {
      if (auto s = weak.lock()) s->accumulated();
    });
  // Around the module's checkpoint, as FSDP2's hooks on a checkpoint-wrapped block: its
  // recomputation in the backward runs on the parameters the backward gathered.
  using Placement = nn::Module::HookPlacement;
  module->register_forward_pre_hook(
      [state](const std::vector<Tensor>& args) {
        std::vector<Tensor> in = args;
        state->pre_forward(in);
        return in;
      },
      Placement::AroundCheckpoint);
  module->register_forward_hook(
      [weak](const Tensor& output) {
        Tensor out = output;
        if (auto s = weak.lock()) s->post_forward(out);
        return out;
      },
      Placement::AroundCheckpoint);
  return FSDPModule(state);
}

void FSDPModule::unshard() const { state_->unshard(); }
void FSDPModule::unshard_async() const { state_->unshard_async(); }
void FSDPModule::reshard() const { state_->reshard(); }
void FSDPModule::set_requires_gradient_sync(bool sync) const { state_->sync = sync; }
void FSDPModule::set_reshard_after_backward(bool reshard) const {
  state_->reshard_after_backward = reshard;
}
void FSDPModule::set_modules_to_forward_prefetch(const std::vector<FSDPModule>& modules) const {
  state_->forward_prefetch.clear();
  for (const FSDPModule& m : modules) state_->forward_prefetch.push_back(m.state_);
}
void FSDPModule::set_modules_to_backward_prefetch(const std::vector<FSDPModule>& modules) const {
  state_->backward_prefetch.clear();
  for (const FSDPModule& m : modules) state_->backward_prefetch.push_back(m.state_);
}
void FSDPModule::set_reshard_after_forward(bool reshard) const {
  state_->set_reshard_after_forward(reshard);
}
bool FSDPModule::requires_gradient_sync() const { return state_->sync; }
bool FSDPModule::reshard_after_backward() const { return state_->reshard_after_backward; }
bool FSDPModule::reshard_after_forward() const { return state_->reshard_after_forward(); }
void FSDPModule::reduce_grad() const { state_->reduce_grad(); }
const ProcessGroup& FSDPModule::group() const { return state_->group(); }
size_t FSDPModule::shard_bytes() const {
  size_t bytes = 0;
  for (const ShardedParam& p : state_->params()) bytes += p.shard.nbytes();
  return bytes;
}

bool is_sharded(const Tensor& parameter) {
  if (!parameter.defined()) return false;
  std::lock_guard lock(registry_mutex);
  return held(parameter.impl_ptr().get());
}

std::vector<FSDPModule> sharded_modules(const std::shared_ptr<nn::Module>& root) {
  std::vector<FSDPModule> out;
  if (!root) return out;
  std::set<const nn::Module*> seen;
  const auto tree = root->named_modules();  // root first, then pre-order
  std::lock_guard lock(registry_mutex);
  for (const auto& [name, m] : tree) {
    if (!seen.insert(m.get()).second) continue;
    auto it = module_states.find(m.get());
    if (it == module_states.end()) continue;
    if (auto state = it->second.lock()) out.emplace_back(state);
  }
  return out;
}

float clip_grad_norm(const std::vector<Tensor>& parameters, float max_norm,
                     const ProcessGroup& group) {
  if (max_norm < 0)
    throw std::invalid_argument("clip_grad_norm: max_norm must be >= 0, got " +
                                std::to_string(max_norm));
  double local = 0;
  for (const Tensor& p : parameters)
    if (p.grad().defined())
      for (float v : p.grad().to_vector()) local += static_cast<double>(v) * v;
  Tensor total = from_vector({static_cast<float>(local)}, {1});
  group.all_reduce(total);
  const float norm = std::sqrt(total.item());
  const float scale = max_norm / (norm + 1e-6f);
  if (scale < 1.0f) {
    NoGradGuard no_grad;
    for (const Tensor& p : parameters) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      std::vector<float> v = g.to_vector();
      for (float& x : v) x *= scale;
      g.copy_(from_vector(v, g.shape()));
    }
  }
  return norm;
}

}  // namespace tensorplay::distributed::fsdp
