// Schedule classes by name.
#include "tensorplay/pipelining/runtime/schedule_class.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace tensorplay::pipelining {

namespace {
std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}
}  // namespace

std::string ScheduleClass::name() const {
  return "Schedule" + std::string(schedules::schedule_name(kind));
}

bool ScheduleClass::is_multi() const { return !schedules::is_single_stage_per_rank(kind); }

std::unique_ptr<PipelineSchedule> ScheduleClass::operator()(
    std::vector<std::shared_ptr<PipelineStage>> stages, int n_microbatches, LossFn loss_fn,
    ScheduleOptions options) const {
  if (is_multi())
    return std::make_unique<PipelineScheduleMulti>(std::move(stages), n_microbatches,
                                                   std::move(loss_fn), kind, std::move(options));
  return std::make_unique<PipelineScheduleSingle>(std::move(stages), n_microbatches,
                                                  std::move(loss_fn), kind, std::move(options));
}

ScheduleClass get_schedule_class(std::string_view name) {
  std::string_view bare = name;
  if (bare.size() > 8 && lower(bare.substr(0, 8)) == "schedule") bare.remove_prefix(8);
  try {
    return ScheduleClass{schedules::parse_schedule_kind(bare)};
  } catch (const std::invalid_argument&) {
    std::string valid;
    for (schedules::ScheduleKind kind : schedules::all_schedule_kinds())
      valid += (valid.empty() ? "" : ", ") + std::string(schedules::schedule_name(kind));
    throw std::invalid_argument("get_schedule_class: unknown schedule '" + std::string(name) +
                                "'; valid names are " + valid +
                                " (case-insensitive, with or without the 'Schedule' prefix)");
  }
}

}  // namespace tensorplay::pipelining
