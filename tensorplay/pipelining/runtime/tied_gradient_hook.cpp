// The tied-gradient hook: a tied parameter's copies (one per stage that uses it) end each step
// holding the sum of their gradients, in this process or across the processes holding a copy.
#include "tensorplay/pipelining/runtime/detail/tied_gradient_hook.h"

#include <map>
#include <set>

#include "tensorplay/distributed/process_group.h"
#include "tensorplay/pipelining/tied_parameters.h"

namespace tensorplay::pipelining::detail {

namespace {

class TiedGradientHook : public StepHook {
 public:
  TiedGradientHook(const ScheduleSpec& spec, const std::vector<int>& group_ranks)
      : local_(spec.local_stages()), distributed_(!group_ranks.empty()) {
    if (!distributed_) return;
    // Ties whose copies live in several processes: one group per tie, of exactly the ranks
    // holding a copy (made alike on every rank: construction is collective), in the stages' job.
    const distributed::ProcessGroup job(
        distributed::DeviceMesh::over_ranks(group_ranks, "pp", group_ranks.front())
            .with_job(spec.stages.front()->get_mesh().job()));
    for (const auto& s : spec.stages)
      for (const auto& [tie, tie_stages] : s->tied_parameters()) {
        std::set<int> holders;
        for (int t : tie_stages) holders.insert(group_ranks.at(spec.placement.stage_to_rank.at(t)));
        if (holders.size() > 1 && !groups_.count(tie))
          groups_.emplace(tie, job.new_group({holders.begin(), holders.end()}));
      }
  }

  void begin(uint64_t) override { tied_ = begin_tied_step(local_); }

  void ranks_stopped(uint64_t, bool, bool quiesced) override {
    // In one process every copy is here: sum them once no rank writes gradients any more.
    if (!distributed_ && quiesced) finish_tied_step(local_, std::move(tied_));
  }

  void finish(uint64_t, Deadline) override {
    if (!distributed_) return;
    // Copies in other processes: all-reduce each tie's local sum over the ranks holding one.
    finish_tied_step(local_, std::move(tied_), true, [&](const std::string& tie, Tensor& sum) {
      if (auto it = groups_.find(tie); it != groups_.end()) it->second.all_reduce(sum);
    });
  }

 private:
  std::vector<PipelineStage*> local_;
  bool distributed_;
  std::map<std::string, distributed::ProcessGroup> groups_;
  TiedGradients tied_;
};

}  // namespace

std::unique_ptr<StepHook> make_tied_gradient_hook(const ScheduleSpec& spec,
                                                  const std::vector<int>& group_ranks) {
  return std::make_unique<TiedGradientHook>(spec, group_ranks);
}

}  // namespace tensorplay::pipelining::detail
