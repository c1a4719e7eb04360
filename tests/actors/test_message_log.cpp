// Tests for message_log.h: off by default; at debug level every stage actor logs what it
// receives, starts, finishes and sends.
#include <catch2/catch.hpp>
#include <sstream>

#include "actors/schedule.h"
#include "log_capture.h"
#include "tensors/knobs.h"
#include "tensors/tensors.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;

namespace {
// The log of one GPipe step on two stages, at debug level or at the logger's own level.
std::string run_one_step(bool debug) {
  return log_capture::capture_message_log(
      [] {
        std::vector<std::shared_ptr<pp::PipelineStage>> stages;
        for (int i = 0; i < 2; ++i)
          stages.push_back(
              std::make_shared<pp::PipelineStage>(tp::nn::Linear(4, 4).ptr(), i, 2, tp::cpu(),
                                                  std::vector<tp::Tensor>{tp::zeros({2, 4})}));
        pp::ScheduleGPipe schedule(stages, 2, tp::nn::mse_loss);
        schedule.step({tp::randn({4, 4})}, {.target = tp::randn({4, 4})});
      },
      debug);
}
}  // namespace

TEST_CASE("the message log is off by default", "[message_log]") {
  if (tp::knob_is_set(tp::Knob::SpdlogLevel)) {
    WARN("SPDLOG_LEVEL is set: the default cannot be checked");
    return;
  }
  CHECK(run_one_step(/*debug=*/false).empty());
}

TEST_CASE("at debug level the log has every receive, start, finish and send", "[message_log]") {
  std::string log = run_one_step(/*debug=*/true);
  CHECK_THAT(log, Catch::Contains("rank=0 step=") && Catch::Contains("event=recv what=step"));
  CHECK_THAT(log,
             Catch::Contains("event=start what=0F0") && Catch::Contains("event=finish what=0F0"));
  CHECK_THAT(log, Catch::Contains("event=send what=input 1:0"));
  CHECK_THAT(log, Catch::Contains("rank=1") && Catch::Contains("event=recv what=input 1:1"));
  CHECK_THAT(
      log, Catch::Contains("event=start what=1B1") && Catch::Contains("event=send what=grad 0:1"));
  CHECK_THAT(log, Catch::Contains("t_us="));
}

namespace {
// The `start` events of one rank in a message log, in order ("1F0", "1B0", ...).
std::vector<std::vector<std::string>> started_by_rank(const std::string& log, int ranks) {
  std::vector<std::vector<std::string>> out(ranks);
  std::istringstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("event=start ") == std::string::npos) continue;
    auto field = [&](const std::string& key) {
      size_t at = line.find(key + "=");
      size_t end = line.find(' ', at);
      return line.substr(at + key.size() + 1, end - at - key.size() - 1);
    };
    out.at(std::stoi(field("rank"))).push_back(field("what"));
  }
  return out;
}
}  // namespace

TEST_CASE("what ran is what was scheduled: every schedule's log lists its order per rank",
          "[message_log][conformance]") {
  namespace sc = tensorplay::schedules;
  for (sc::ScheduleKind kind :
       {sc::ScheduleKind::GPipe, sc::ScheduleKind::OneFOneB, sc::ScheduleKind::Interleaved1F1B,
        sc::ScheduleKind::LoopedBFS, sc::ScheduleKind::InterleavedZeroBubble,
        sc::ScheduleKind::ZBVZeroBubble, sc::ScheduleKind::DualPipeV}) {
    const int ranks = 4;
    const int stages_count = sc::is_single_stage_per_rank(kind) ? ranks : 2 * ranks;
    const int microbatches = 8;
    std::unique_ptr<pp::PipelineSchedule> schedule;
    std::string log = log_capture::capture_message_log(
        [&] {
          std::vector<std::shared_ptr<pp::PipelineStage>> stages;
          for (int i = 0; i < stages_count; ++i)
            stages.push_back(std::make_shared<pp::PipelineStage>(
                tp::nn::Linear(4, 4).ptr(), i, stages_count, tp::cpu(),
                std::vector<tp::Tensor>{tp::zeros({1, 4})}));
          schedule =
              std::make_unique<pp::PipelineSchedule>(stages, microbatches, tp::nn::mse_loss, kind);
          schedule->step({tp::randn({8, 4})}, {.target = tp::randn({8, 4})});
        },
        true);
    INFO(sc::schedule_name(kind));
    auto ran = started_by_rank(log, ranks);
    for (int r = 0; r < ranks; ++r) {
      std::vector<std::string> want;
      for (const sc::Action& a : schedule->order()[r]) want.push_back(sc::to_string(a));
      INFO("rank " << r);
      CHECK(ran[r] == want);
    }
  }
}
