// Misuse of the schedules in one process: each case asserts the error's type and the words that
// name the fix, and that the error comes on time (no hang, no crash).
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <thread>

#include "misuse_support.h"
#include "tensorplay/pipelining/build_stage.h"
#include "tensorplay/pipelining/pipeline.h"
#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace sc = tensorplay::schedules;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

constexpr int64_t kDim = 8;

/// What the test shares with its slow stage: how long each forward pauses, whether a pause
/// still running should end now, and how many forwards are inside the stage's user code.
struct PauseControl {
  std::atomic<int> pause_ms{0};
  std::atomic<bool> release{false};
  std::atomic<int> inside{0};
};

/// Linear whose forward sleeps `pause_ms` milliseconds first (in slices, ended early by
/// `release`): a stage stuck in user code.
struct SlowLinear : tp::nn::Module {
  explicit SlowLinear(std::shared_ptr<PauseControl> control) : control(std::move(control)) {
    lin = register_module("lin", tp::nn::Linear(kDim, kDim));
  }
  tp::Tensor forward(const tp::Tensor& x) override {
    control->inside.fetch_add(1);
    const auto until = Clock::now() + milliseconds(control->pause_ms.load());
    while (Clock::now() < until && !control->release.load())
      std::this_thread::sleep_for(milliseconds(5));
    tp::Tensor y = lin(x);
    control->inside.fetch_sub(1);
    return y;
  }
  std::shared_ptr<PauseControl> control;
  tp::nn::Linear lin{nullptr};
};

/// Two stages; stage 1 pauses for `pause_ms` in every forward when set. A schedule that gives up
/// on a stuck stage detaches it, so on leaving the test the stuck forward is released and waited
/// for (at most 10 s): no stage runs the test's code after the test, or after the process began
/// to exit.
struct TwoStages {
  std::shared_ptr<PauseControl> control = std::make_shared<PauseControl>();
  std::atomic<int>* pause = &control->pause_ms;
  std::vector<std::shared_ptr<pp::PipelineStage>> stages;
  TwoStages() {
    tp::manual_seed(7);
    stages.push_back(
        std::make_shared<pp::PipelineStage>(tp::nn::Linear(kDim, kDim).ptr(), 0, 2, tp::cpu(),
                                            std::vector<tp::Tensor>{tp::zeros({2, kDim})}));
    stages.push_back(
        std::make_shared<pp::PipelineStage>(std::make_shared<SlowLinear>(control), 1, 2, tp::cpu(),
                                            std::vector<tp::Tensor>{tp::zeros({2, kDim})}));
  }
  ~TwoStages() {
    control->release.store(true);
    const auto until = Clock::now() + std::chrono::seconds(10);
    while (control->inside.load() > 0 && Clock::now() < until)
      std::this_thread::sleep_for(milliseconds(5));
  }
  TwoStages(const TwoStages&) = delete;
  TwoStages& operator=(const TwoStages&) = delete;
};

long long ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - t).count();
}

/// Runs `f`, which must throw E; returns its message and checks it came within `limit`.
template <class E, class F>
std::string throws_within(F&& f, milliseconds limit) {
  auto start = Clock::now();
  try {
    f();
  } catch (const E& e) {
    INFO("took " << ms_since(start) << " ms: " << e.what());
    CHECK(ms_since(start) <= limit.count() * misuse::kSanitizerSlowdown);
    return e.what();
  }
  FAIL("no exception");
  return {};
}

struct Mlp : tp::nn::Module {
  Mlp() {
    a = register_module("a", tp::nn::Linear(kDim, kDim));
    b = register_module("b", tp::nn::Linear(kDim, kDim));
  }
  tp::Tensor forward(const tp::Tensor& x) override { return b(a(x)); }
  tp::nn::Linear a{nullptr}, b{nullptr};
};

}  // namespace

TEST_CASE("two schedules over the same stages: the second is refused at construction",
          "[misuse][schedule]") {
  TwoStages s;
  auto first = std::make_unique<pp::Schedule1F1B>(s.stages, 2, tp::nn::mse_loss);
  std::string what = throws_within<std::logic_error>(
      [&] { pp::ScheduleGPipe second(s.stages, 2, tp::nn::mse_loss); }, milliseconds(2000));
  CHECK_THAT(what, Catch::Contains("already belongs to a 1F1B") &&
                       Catch::Contains("one schedule at a time") &&
                       Catch::Contains("destroy that schedule first"));
  first.reset();  // released: a new schedule may take the stages
  pp::ScheduleGPipe second(s.stages, 2, tp::nn::mse_loss);
  second.step({tp::randn({4, kDim})}, {.target = tp::randn({4, kDim})});
}

TEST_CASE("a schedule refused at construction does not keep the stages", "[misuse][schedule]") {
  TwoStages s;
  CHECK_THROWS_AS(pp::Schedule1F1B(s.stages, 0, tp::nn::mse_loss), std::invalid_argument);
  pp::Schedule1F1B ok(s.stages, 2, tp::nn::mse_loss);
}

TEST_CASE("step from two threads at once: the second caller fails at once", "[misuse][schedule]") {
  TwoStages s;
  pp::Schedule1F1B schedule(s.stages, 2, tp::nn::mse_loss);
  s.pause->store(400);
  auto first = std::async(std::launch::async, [&] {
    schedule.step({tp::randn({4, kDim})}, {.target = tp::randn({4, kDim})});
  });
  std::this_thread::sleep_for(milliseconds(100));
  std::string what = throws_within<std::logic_error>(
      [&] {
        schedule.step({tp::randn({4, kDim})}, {.target = tp::randn({4, kDim})});
      },
      milliseconds(100));
  CHECK_THAT(what, Catch::Contains("another thread is running a step") &&
                       Catch::Contains("one step at a time"));
  first.get();
  s.pause->store(0);
  schedule.step({tp::randn({4, kDim})}, {.target = tp::randn({4, kDim})});
}

TEST_CASE("step_timeout is honoured while a stage is stuck, naming the stuck rank first",
          "[misuse][schedule]") {
  TwoStages s;
  pp::Schedule1F1B schedule(s.stages, 2, tp::nn::mse_loss, {.step_timeout = milliseconds(200)});
  s.pause->store(2500);
  // Within step_timeout + 10%, even with the stage inside its compute the whole time.
  std::string what = throws_within<pp::PipelineError>(
      [&] {
        schedule.step({tp::randn({4, kDim})}, {.target = tp::randn({4, kDim})});
      },
      milliseconds(220));
  CHECK_THAT(what, Catch::Contains("did not finish within 200 ms") &&
                       Catch::StartsWith("1F1B: step 1 did not finish within 200 ms; "
                                         "[rank 1 is running 1F0"));
  CHECK_THAT(what, Catch::Contains("rank 0: waiting for 0B0"));
  CHECK_THAT(what, Catch::Contains("it is not waited for"));
  // While rank 1 is still inside step 1's forward, a new step fails at once and says why.
  s.pause->store(0);
  what = throws_within<pp::PipelineError>(
      [&] {
        schedule.step({tp::randn({4, kDim})}, {.target = tp::randn({4, kDim})});
      },
      milliseconds(100));
  CHECK_THAT(what, Catch::Contains("step 1 failed") && Catch::Contains("rank 1 is running 1F0") &&
                       Catch::Contains("cannot start until every stage has returned"));
  // Once it has returned, the schedule trains again.
  auto until = Clock::now() + std::chrono::seconds(10);
  for (;;) {
    try {
      schedule.step({tp::randn({4, kDim})}, {.target = tp::randn({4, kDim})});
      break;
    } catch (const pp::PipelineError& e) {
      REQUIRE(Clock::now() < until);
      std::this_thread::sleep_for(milliseconds(100));
    }
  }
}

TEST_CASE("destroying a schedule whose stage is stuck returns in bounded time",
          "[misuse][schedule]") {
  TwoStages s;
  auto schedule = std::make_unique<pp::Schedule1F1B>(
      s.stages, 2, tp::nn::mse_loss, pp::ScheduleOptions{.step_timeout = milliseconds(100)});
  s.pause->store(5000);
  CHECK_THROWS_AS(schedule->step({tp::randn({4, kDim})}, {.target = tp::randn({4, kDim})}),
                  pp::PipelineError);
  auto start = Clock::now();
  schedule.reset();  // reports the stuck stage and detaches it
  CHECK(ms_since(start) < 3500);
  s.pause->store(0);
}

TEST_CASE("invalid schedule options are refused", "[misuse][schedule]") {
  TwoStages s;
  CHECK_THROWS_WITH(
      pp::ScheduleInterleaved1F1B(s.stages, 2, tp::nn::mse_loss, {.stages_per_rank = -1}),
      Catch::Contains("stages_per_rank must be 0") && Catch::Contains("-1"));
  CHECK_THROWS_WITH(
      pp::Schedule1F1B(s.stages, 2, tp::nn::mse_loss, {.step_timeout = milliseconds(-5)}),
      Catch::Contains("step_timeout must be positive") && Catch::Contains("-5 ms"));
  CHECK_THROWS_WITH(
      pp::Schedule1F1B(s.stages, 2, tp::nn::mse_loss, {.transfer_timeout = milliseconds(0)}),
      Catch::Contains("transfer_timeout must be positive"));
  CHECK_THROWS_AS(
      pp::Schedule1F1B(s.stages, 2, tp::nn::mse_loss, {.step_timeout = milliseconds(-5)}),
      std::invalid_argument);
}

TEST_CASE("stages of two different models are refused", "[misuse][schedule]") {
  Mlp m1, m2;
  auto x = tp::randn({2, kDim});
  auto pipe1 = pp::pipeline(m1, {x}, {.split_spec = {{"b", pp::SplitPoint::Beginning}}});
  auto pipe2 = pp::pipeline(m2, {x}, {.split_spec = {{"b", pp::SplitPoint::Beginning}}});
  std::vector<std::shared_ptr<pp::PipelineStage>> stages = {
      std::make_shared<pp::PipelineStage>(pp::build_stage(pipe1, 0, tp::cpu())),
      std::make_shared<pp::PipelineStage>(pp::build_stage(pipe2, 1, tp::cpu()))};
  CHECK_THROWS_WITH(pp::Schedule1F1B(stages, 2, tp::nn::mse_loss),
                    Catch::Contains("different pipelines") && Catch::Contains("one Pipe"));
  CHECK_THROWS_AS(pp::Schedule1F1B(stages, 2, tp::nn::mse_loss), std::invalid_argument);
  stages[1] = std::make_shared<pp::PipelineStage>(pp::build_stage(pipe1, 1, tp::cpu()));
  pp::Schedule1F1B ok(stages, 2, tp::nn::mse_loss);
}

TEST_CASE("a failed eval does not speak of gradients", "[misuse][schedule]") {
  TwoStages s;
  pp::ScheduleGPipe schedule(s.stages, 2, [](const tp::Tensor&, const tp::Tensor&) -> tp::Tensor {
    throw std::invalid_argument("loss refuses");
  });
  std::string what = throws_within<pp::PipelineError>(
      [&] {
        schedule.eval({tp::randn({4, kDim})}, {.target = tp::randn({4, kDim})});
      },
      milliseconds(2000));
  CHECK_THAT(what, Catch::Contains("loss refuses") && Catch::Contains("parameters are unchanged"));
  CHECK_THAT(what, !Catch::Contains("partial"));
}
