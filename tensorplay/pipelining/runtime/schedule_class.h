// get_schedule_class: a schedule chosen by its name at run time (a config file, a command line),
// as PyTorch's torch.distributed.pipelining.get_schedule_class.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tensorplay/pipelining/runtime/schedule.h"

namespace tensorplay::pipelining {

/// A schedule class found by name: constructs that schedule.
struct ScheduleClass {
  schedules::ScheduleKind kind = schedules::ScheduleKind::OneFOneB;

  /// The class's name, e.g. "Schedule1F1B".
  std::string name() const;
  /// True for the multi-stage schedules (PipelineScheduleMulti), false for GPipe and 1F1B.
  bool is_multi() const;
  /// Constructs the schedule, as the named class's constructor would.
  std::unique_ptr<PipelineSchedule> operator()(std::vector<std::shared_ptr<PipelineStage>> stages,
                                               int n_microbatches, LossFn loss_fn = nullptr,
                                               ScheduleOptions options = {}) const;
};

/// The schedule class called `name`, case-insensitively, with or without the "Schedule" prefix:
/// "1F1B", "Schedule1F1B", "gpipe", "ZBVZeroBubble", ... Throws std::invalid_argument naming the
/// unknown name and listing the valid ones.
ScheduleClass get_schedule_class(std::string_view name);

}  // namespace tensorplay::pipelining
