// Tests for schedule_class.h: get_schedule_class finds every schedule by name, case-insensitively
// and with or without the "Schedule" prefix, builds it, and lists the valid names otherwise.
#include <catch2/catch.hpp>

#include "tensorplay/pipelining/runtime/schedule_class.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace sc = tensorplay::schedules;

TEST_CASE("get_schedule_class finds every schedule by name", "[schedule_class]") {
  for (auto kind : sc::all_schedule_kinds()) {
    std::string name(sc::schedule_name(kind));
    std::string upper = name, lower = name;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const std::string& spelling :
         {name, upper, lower, "Schedule" + name, "schedule" + lower}) {
      INFO(spelling);
      pp::ScheduleClass found = pp::get_schedule_class(spelling);
      CHECK(found.kind == kind);
      CHECK(found.name() == "Schedule" + name);
      CHECK(found.is_multi() == !sc::is_single_stage_per_rank(kind));
    }
  }
}

TEST_CASE("an unknown schedule name lists the valid ones", "[schedule_class]") {
  CHECK_THROWS_WITH(pp::get_schedule_class("1F2B"),
                    Catch::Contains("unknown schedule '1F2B'") && Catch::Contains("GPipe") &&
                        Catch::Contains("1F1B") && Catch::Contains("ZBVZeroBubble") &&
                        Catch::Contains("DualPipeV") && Catch::Contains("case-insensitive"));
  CHECK_THROWS_AS(pp::get_schedule_class(""), std::invalid_argument);
  CHECK_THROWS_AS(pp::get_schedule_class("Schedule"), std::invalid_argument);
}

TEST_CASE("a schedule class builds its schedule, which trains", "[schedule_class]") {
  for (const char* name : {"gpipe", "interleaved1f1b", "vhalf", "ScheduleVMin"}) {
    INFO(name);
    std::vector<std::shared_ptr<pp::PipelineStage>> stages;
    for (int i = 0; i < 4; ++i)
      stages.push_back(std::make_shared<pp::PipelineStage>(
          tp::nn::Linear(4, 4).ptr(), i, 4, tp::cpu(), std::vector<tp::Tensor>{tp::zeros({2, 4})}));
    pp::ScheduleClass cls = pp::get_schedule_class(name);
    std::unique_ptr<pp::PipelineSchedule> schedule = cls(stages, 4, tp::nn::mse_loss);
    CHECK(schedule->kind() == cls.kind);
    CHECK(schedule->num_ranks() == (cls.is_multi() ? 2 : 4));
    std::vector<tp::Tensor> losses;
    schedule->step({tp::randn({8, 4})}, {.target = tp::randn({8, 4}), .losses = &losses});
    CHECK(losses.size() == 4);
    CHECK((cls.is_multi() ? dynamic_cast<pp::PipelineScheduleMulti*>(schedule.get()) != nullptr
                          : dynamic_cast<pp::PipelineScheduleSingle*>(schedule.get()) != nullptr));
  }
}
