// A step's memory figures: the stages' accounts (and their rank's parent account) read after the
// step, with the parameter, gradient and optimizer bytes counted from the tensors themselves.
#include "tensorplay/pipelining/runtime/memory_stats.h"

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "tensorplay/core/memory_accounting.h"
#include "tensorplay/core/tensor_memory.h"
#include "tensorplay/optim/optimizer.h"
#include "tensorplay/pipelining/pipeline_stage.h"
#include "tensorplay/pipelining/runtime/detail/stage_sharding.h"
#include "tensorplay/pipelining/runtime/step_data.h"

namespace tensorplay::pipelining {
namespace {

using Impl = const TensorImpl*;

int64_t unique_bytes(const std::vector<Tensor>& tensors, std::unordered_set<Impl>& seen) {
  int64_t bytes = 0;
  for (const Tensor& t : tensors)
    if (t.defined() && seen.insert(t.impl_ptr().get()).second)
      bytes += static_cast<int64_t>(t.nbytes());
  return bytes;
}

// Parameter, buffer and gradient bytes of one stage.
void count_fixed(const PipelineStage& stage, StageMemoryStats& out) {
  std::unordered_set<Impl> seen;
  std::vector<Tensor> grads;
  const std::vector<Tensor> params = stage.module().parameters();
  for (const Tensor& p : params) grads.push_back(p.grad());
  std::vector<Tensor> buffers;
  for (const auto& [name, b] : stage.module().named_buffers()) buffers.push_back(b);
  out.parameter_bytes = unique_bytes(params, seen) + unique_bytes(buffers, seen);
  out.gradient_bytes = unique_bytes(grads, seen);
}

// Optimizer state bytes per stage index ("state.<i>.<name>" belongs to parameter i).
std::map<int, int64_t> optimizer_bytes(const std::vector<std::shared_ptr<PipelineStage>>& stages,
                                       const optim::Optimizer& optimizer) {
  std::unordered_map<Impl, int> stage_of;
  for (const auto& s : stages)
    if (s)
      for (const Tensor& p : s->module().parameters())
        stage_of[p.impl_ptr().get()] = s->stage_index();
  const std::vector<Tensor>& params = optimizer.parameters();
  std::map<int, int64_t> bytes;
  const std::string prefix = "state.";
  for (const auto& [key, tensor] : optimizer.state_dict()) {
    if (key.rfind(prefix, 0) != 0 || !tensor.defined()) continue;
    const size_t index = std::stoul(key.substr(prefix.size()));
    if (index >= params.size()) continue;
    auto it = stage_of.find(params[index].impl_ptr().get());
    if (it != stage_of.end()) bytes[it->second] += static_cast<int64_t>(tensor.nbytes());
  }
  return bytes;
}

RankMemoryStats& rank_entry(std::vector<RankMemoryStats>& ranks, int rank) {
  for (RankMemoryStats& r : ranks)
    if (r.rank == rank) return r;
  ranks.push_back({.rank = rank});
  return ranks.back();
}

}  // namespace

void link_rank_memory(const std::vector<PipelineStage*>& stages) {
  auto rank = std::make_shared<MemoryAccount>();
  for (PipelineStage* s : stages) s->memory_account()->set_parent(rank);
}

void hand_over_results(StepData& step) {
  std::lock_guard lock(step.results_mutex);
  disown_memory(step.losses);
  for (const std::vector<Tensor>& outputs : step.outputs) disown_memory(outputs);
}

void reset_memory_peaks(const std::vector<PipelineStage*>& stages) {
  for (PipelineStage* s : stages) {
    s->memory_account()->reset_peaks();
    if (s->memory_account()->parent()) s->memory_account()->parent()->reset_peaks();
  }
  detail::reset_gathered_peaks(stages);
}

int64_t rank_memory_bytes(const std::vector<PipelineStage*>& stages) {
  if (stages.empty()) return 0;
  const auto& account = stages.front()->memory_account();
  return account->parent() ? account->parent()->current() : account->current();
}

MemoryStats collect_memory_stats(const std::vector<std::shared_ptr<PipelineStage>>& stages,
                                 const std::vector<int>& stage_to_rank,
                                 const optim::Optimizer* optimizer) {
  MemoryStats out;
  std::map<int, int64_t> optimizer_of;
  if (optimizer) optimizer_of = optimizer_bytes(stages, *optimizer);
  for (const auto& s : stages) {
    if (!s) continue;
    const MemoryAccount& a = *s->memory_account();
    StageMemoryStats st;
    st.stage = s->stage_index();
    st.rank = st.stage < static_cast<int>(stage_to_rank.size()) ? stage_to_rank[st.stage] : 0;
    st.peak_activation_bytes =
        std::max<int64_t>(0, a.peak(MemoryKind::Activation) - a.base(MemoryKind::Activation));
    st.peak_step_bytes = std::max<int64_t>(0, a.peak() - a.base());
    st.activation_bytes = a.current(MemoryKind::Activation);
    count_fixed(*s, st);
    st.optimizer_bytes = optimizer_of[st.stage];
    st.gathered_parameter_bytes = detail::gathered_parameter_bytes(*s).first;
    out.stages.push_back(st);

    RankMemoryStats& r = rank_entry(out.ranks, st.rank);
    const MemoryAccount& ra = a.parent() ? *a.parent() : a;
    r.peak_activation_bytes =
        std::max<int64_t>(0, ra.peak(MemoryKind::Activation) - ra.base(MemoryKind::Activation));
    r.parameter_bytes += st.parameter_bytes;
    r.gradient_bytes += st.gradient_bytes;
    r.optimizer_bytes += st.optimizer_bytes;
    r.peak_gathered_parameter_bytes = detail::gathered_parameter_bytes(*s).second;
    r.peak_bytes = ra.peak();  // fixed bytes added below, once all stages are counted
  }
  for (RankMemoryStats& r : out.ranks) r.peak_bytes += r.parameter_bytes + r.optimizer_bytes;
  std::sort(out.ranks.begin(), out.ranks.end(),
            [](const RankMemoryStats& a, const RankMemoryStats& b) { return a.rank < b.rank; });
  return out;
}

}  // namespace tensorplay::pipelining
