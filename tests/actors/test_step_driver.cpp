// Tests of the step driver and the step hooks with a stand-in rank runtime (no actors, no
// channel): dispatch, reports, a failure, a timeout with status, stuck ranks, the hooks' order.
#include <catch2/catch.hpp>
#include <deque>
#include <thread>

#include "tensorplay/pipelining/runtime/detail/step_hooks.h"
#include "tensorplay/pipelining/runtime/detail/step_driver.h"
#include "tensorplay/pipelining/runtime/schedule.h"

using namespace tensorplay;
using namespace tensorplay::pipelining;
using namespace tensorplay::pipelining::detail;
using namespace std::chrono_literals;

namespace {

/// Scripted ranks: each dispatch queues `script`'s reports; status and abort are recorded.
class StandInRanks : public RankRuntime {
 public:
  int local = 2;
  std::deque<RankReport> script;
  std::string busy;  ///< what still_in and abort report (empty: every rank dropped the step)
  std::vector<std::string> calls;

  bool distributed() const override { return false; }
  int local_ranks() const override { return local; }
  std::string describe_rank(int rank) const override { return "rank " + std::to_string(rank); }
  void dispatch(std::shared_ptr<StepData> data) override {
    calls.push_back("dispatch " + std::to_string(data->step));
  }
  std::optional<RankReport> next_report(uint64_t, Deadline deadline) override {
    if (script.empty()) {
      std::this_thread::sleep_until(deadline);
      return std::nullopt;
    }
    RankReport r = script.front();
    script.pop_front();
    return r;
  }
  std::string collect_status(uint64_t step, Deadline) override {
    calls.push_back("status " + std::to_string(step));
    return " [rank 1: waits for input 1:0]";
  }
  std::vector<std::string> abort(uint64_t step, Deadline) override {
    calls.push_back("abort " + std::to_string(step));
    return busy.empty() ? std::vector<std::string>{} : std::vector<std::string>{busy};
  }
  void fail_step_everywhere(uint64_t, const std::string&) override {}
  std::string still_in(uint64_t) const override { return busy; }
  std::vector<std::string> stop(std::chrono::milliseconds) override { return {}; }
};

std::shared_ptr<StepData> step_data(uint64_t step) {
  auto d = std::make_shared<StepData>();
  d->step = step;
  return d;
}

struct RecordingHook : StepHook {
  std::string name;
  std::vector<std::string>* log;
  bool throw_on_finish = false;
  RecordingHook(std::string n, std::vector<std::string>* l) : name(std::move(n)), log(l) {}
  void begin(uint64_t s) override { log->push_back(name + " begin " + std::to_string(s)); }
  void ranks_stopped(uint64_t, bool failed, bool quiesced) override {
    log->push_back(name + " stopped " + (failed ? "failed" : "ok") + (quiesced ? "" : " busy"));
  }
  void finish(uint64_t, Deadline) override {
    log->push_back(name + " finish");
    if (throw_on_finish) throw std::runtime_error(name + " could not finish");
  }
  void abandon(uint64_t, const std::string& why) override {
    log->push_back(name + " abandon: " + why);
  }
};

}  // namespace

TEST_CASE("step driver: a step ends when every local rank is done", "[actors][driver]") {
  StandInRanks ranks;
  ranks.script = {{true, 1, ""}, {true, 0, ""}};
  StepDriver driver("1F1B", 1000ms);
  uint64_t step = driver.next_step();
  CHECK(step == 1);
  StepOutcome out = driver.run(ranks, step_data(step));
  CHECK(out.ok());
  CHECK(ranks.calls == std::vector<std::string>{"dispatch 1"});
  CHECK(driver.next_step() == 2);
}

TEST_CASE("step driver: a rank's failure names it and aborts the others", "[actors][driver]") {
  StandInRanks ranks;
  ranks.script = {{true, 0, ""}, {false, 1, "loss is NaN"}};
  StepDriver driver("GPipe", 1000ms);
  StepOutcome out = driver.run(ranks, step_data(driver.next_step()));
  REQUIRE_FALSE(out.ok());
  CHECK(out.failure == "rank 1 failed: loss is NaN");
  CHECK(out.quiesced());
  CHECK(ranks.calls == std::vector<std::string>{"dispatch 1", "abort 1"});
  CHECK_THAT(out.message(true), Catch::Contains("gradients of this step are partial"));
  CHECK_THAT(out.message(false), Catch::Contains("parameters are unchanged"));
  driver.check_not_stuck(ranks);  // every rank dropped it: the next step may start
}

TEST_CASE("step driver: a timeout asks every rank what it waits for", "[actors][driver]") {
  StandInRanks ranks;
  ranks.script = {{true, 0, ""}};  // rank 1 never reports
  StepDriver driver("1F1B", 30ms);
  auto t0 = std::chrono::steady_clock::now();
  StepOutcome out = driver.run(ranks, step_data(driver.next_step()));
  CHECK(std::chrono::steady_clock::now() - t0 >= 30ms);
  CHECK_THAT(out.failure, Catch::StartsWith("1F1B: step 1 did not finish within 30 ms;"));
  CHECK_THAT(out.failure, Catch::Contains("[rank 1: waits for input 1:0]"));
  CHECK(ranks.calls == std::vector<std::string>{"dispatch 1", "status 1", "abort 1"});
}

TEST_CASE("step driver: a rank stuck in a failed step blocks the next until it returns",
          "[actors][driver]") {
  StandInRanks ranks;
  ranks.script = {{false, 0, "boom"}};
  ranks.busy = "rank 1 is running F 1:0 for 900 ms";
  StepDriver driver("1F1B", 1000ms);
  StepOutcome out = driver.run(ranks, step_data(driver.next_step()));
  CHECK_FALSE(out.quiesced());
  CHECK_THAT(out.message(true), Catch::Contains("rank 1 is running F 1:0 for 900 ms: it is not "
                                                "waited for"));
  CHECK_THROWS_AS(driver.check_not_stuck(ranks), PipelineError);
  CHECK_THROWS_WITH(driver.check_not_stuck(ranks),
                    Catch::Contains("step 1 failed and a stage is still in it"));
  ranks.busy.clear();
  driver.check_not_stuck(ranks);
}

TEST_CASE("step hooks run in order, and a failed finish abandons it and the later ones",
          "[actors][driver]") {
  std::vector<std::string> log;
  StepHooks hooks;
  auto tied = std::make_unique<RecordingHook>("tied", &log);
  auto dp = std::make_unique<RecordingHook>("dp", &log);
  auto* tied_ptr = tied.get();
  hooks.add(std::move(tied));
  hooks.add(std::move(dp));
  hooks.begin(3);
  hooks.ranks_stopped(3, false, true);
  hooks.finish(3, std::chrono::steady_clock::now());
  CHECK(log == std::vector<std::string>{"tied begin 3", "dp begin 3", "tied stopped ok",
                                        "dp stopped ok", "tied finish", "dp finish"});
  log.clear();
  tied_ptr->throw_on_finish = true;
  CHECK_THROWS_WITH(hooks.finish(4, std::chrono::steady_clock::now()), "tied could not finish");
  CHECK(log == std::vector<std::string>{"tied finish", "tied abandon: tied could not finish",
                                        "dp abandon: tied could not finish"});
}
