// Tests for message_log.h: off by default; at debug level every stage actor logs what it
// receives, starts, finishes and sends.
#include <catch2/catch.hpp>
#include <sstream>

#include "actors/schedule.h"
#include "log_capture.h"
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
  if (std::getenv("SPDLOG_LEVEL")) {
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
