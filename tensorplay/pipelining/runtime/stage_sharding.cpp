// Sharded stages under the schedules: the stages whose modules fully_shard was applied to, checked
// against their mesh, and the UNSHARD, REDUCE_GRAD and RESHARD actions run on them.
#include "tensorplay/pipelining/runtime/detail/stage_sharding.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>

#include "tensorplay/distributed/fsdp/fully_shard.h"
#include "tensorplay/schedules/sharding_actions.h"

namespace tensorplay::pipelining::detail {

namespace fsdp = distributed::fsdp;
using schedules::ActionKind;

namespace {

/// What a stage's sharded modules were set to before UNSHARD, restored at RESHARD.
struct Settings {
  bool sync = true, reshard_after_forward = true, reshard_after_backward = true;
};

/// Per stage between its UNSHARD and its RESHARD: its modules' own settings.
std::mutex saved_mutex;
std::map<const PipelineStage*, std::vector<Settings>> saved;

/// Gathered-parameter bytes now and their peak, by stage and by rank (its stages' parent memory
/// account), under saved_mutex.
struct Gathered {
  int64_t now = 0, peak = 0;
};
std::map<const void*, Gathered> gathered;

const void* rank_key(const PipelineStage& stage) {
  const auto& parent = stage.memory_account()->parent();
  return parent ? static_cast<const void*>(parent.get()) : static_cast<const void*>(&stage);
}

/// Adds `bytes` (negative: drops them) to the stage's and its rank's gathered bytes.
void count_gathered(const PipelineStage& stage, int64_t bytes) {
  std::lock_guard lock(saved_mutex);
  for (const void* key : {static_cast<const void*>(&stage), rank_key(stage)}) {
    Gathered& g = gathered[key];
    g.now = std::max<int64_t>(0, g.now + bytes);
    g.peak = std::max(g.peak, g.now);
  }
}

int64_t parameter_bytes(const PipelineStage& stage) {
  int64_t bytes = 0;
  for (const Tensor& p : stage.module().parameters()) bytes += static_cast<int64_t>(p.nbytes());
  return bytes;
}

void restore(const PipelineStage& stage, const std::vector<fsdp::FSDPModule>& modules) {
  std::vector<Settings> settings;
  {
    std::lock_guard lock(saved_mutex);
    auto it = saved.find(&stage);
    if (it == saved.end()) return;
    settings = std::move(it->second);
    saved.erase(it);
  }
  for (size_t i = 0; i < modules.size() && i < settings.size(); ++i) {
    modules[i].set_requires_gradient_sync(settings[i].sync);
    modules[i].set_reshard_after_forward(settings[i].reshard_after_forward);
    modules[i].set_reshard_after_backward(settings[i].reshard_after_backward);
  }
}

std::string join(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return "[" + out + "]";
}

}  // namespace

std::vector<int> sharded_stage_indices(const std::vector<PipelineStage*>& stages) {
  std::set<int> out;
  for (PipelineStage* s : stages)
    if (!fsdp::sharded_modules(s->module_ptr()).empty()) out.insert(s->stage_index());
  return {out.begin(), out.end()};
}

void check_sharded_stages(const std::vector<PipelineStage*>& stages, const std::string& schedule) {
  for (PipelineStage* s : stages) {
    const std::vector<fsdp::FSDPModule> modules = fsdp::sharded_modules(s->module_ptr());
    if (modules.empty()) continue;
    const std::string stage = schedule + ": stage " + std::to_string(s->stage_index());
    const distributed::DeviceMesh& mesh = s->get_mesh();
    if (mesh.empty() || !mesh.has_dim("dp"))
      throw std::invalid_argument(
          stage +
          " holds modules sharded with fully_shard but its mesh has no "
          "\"dp\" dimension; build the stages on a {pp, dp} mesh "
          "(build_stage(pipe, s, device, mesh)) and shard over mesh[\"dp\"]");
    const std::vector<int> dp = mesh["dp"].ranks();
    std::set<const TensorImpl*> sharded;
    for (const fsdp::FSDPModule& m : modules) {
      if (m.group().ranks() != dp)
        throw std::invalid_argument(stage + " holds a module sharded over ranks " +
                                    join(m.group().ranks()) + ", but the stage's \"dp\" group is " +
                                    join(dp) + "; pass mesh[\"dp\"] of the stage's mesh to " +
                                    "fully_shard");
    }
    // A parameter that no sharded module holds keeps its shape: sharded ones are cut to rows.
    for (const auto& [name, p] : s->module().named_parameters())
      if (!fsdp::is_sharded(p))
        throw std::invalid_argument(stage + "'s parameter '" + name +
                                    "' is not sharded while others are; apply fully_shard to the "
                                    "stage's root module too (after its blocks), so that every "
                                    "parameter is sharded over \"dp\"");
  }
}

void run_sharding_action(PipelineStage& stage, ActionKind kind) {
  const std::vector<fsdp::FSDPModule> modules = fsdp::sharded_modules(stage.module_ptr());
  switch (kind) {
    case ActionKind::Unshard: {
      std::vector<Settings> settings;
      for (const fsdp::FSDPModule& m : modules) {
        settings.push_back(
            {m.requires_gradient_sync(), m.reshard_after_forward(), m.reshard_after_backward()});
        m.set_requires_gradient_sync(false);
        m.set_reshard_after_forward(false);
        m.set_reshard_after_backward(false);
      }
      {
        std::lock_guard lock(saved_mutex);
        saved.try_emplace(&stage, std::move(settings));  // kept from an unfinished step if any
      }
      for (const fsdp::FSDPModule& m : modules) m.unshard_async();  // every gather in flight
      for (const fsdp::FSDPModule& m : modules) m.unshard();
      count_gathered(stage, parameter_bytes(stage));
      return;
    }
    case ActionKind::ReduceGrad:
      for (const fsdp::FSDPModule& m : modules) m.reduce_grad();
      return;
    case ActionKind::Reshard: {
      count_gathered(stage, -parameter_bytes(stage));
      for (const fsdp::FSDPModule& m : modules) m.reshard();
      restore(stage, modules);
      return;
    }
    default:
      throw std::logic_error("run_sharding_action: not a sharding action: " +
                             std::string(schedules::kind_name(kind)));
  }
}

void abandon_sharding(PipelineStage& stage) {
  {
    std::lock_guard lock(saved_mutex);
    if (!saved.count(&stage)) return;
  }
  const std::vector<fsdp::FSDPModule> modules = fsdp::sharded_modules(stage.module_ptr());
  count_gathered(stage, -parameter_bytes(stage));
  for (const fsdp::FSDPModule& m : modules) m.reshard();
  restore(stage, modules);
}

std::pair<int64_t, int64_t> gathered_parameter_bytes(const PipelineStage& stage) {
  std::lock_guard lock(saved_mutex);
  auto s = gathered.find(&stage);
  auto r = gathered.find(rank_key(stage));
  return {s == gathered.end() ? 0 : s->second.peak, r == gathered.end() ? 0 : r->second.peak};
}

void reset_gathered_peaks(const std::vector<PipelineStage*>& stages) {
  std::lock_guard lock(saved_mutex);
  for (PipelineStage* s : stages)
    for (const void* key : {static_cast<const void*>(s), rank_key(*s)})
      if (auto it = gathered.find(key); it != gathered.end()) it->second.peak = it->second.now;
}

schedules::RankOrder with_sharding_actions(const schedules::RankOrder& order,
                                           const std::vector<int>& sharded) {
  if (sharded.empty()) return order;
  return schedules::add_sharding_actions({order}, sharded).front();
}

}  // namespace tensorplay::pipelining::detail
