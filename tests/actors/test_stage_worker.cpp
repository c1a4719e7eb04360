// Tests for stage_worker.h on its own (no actors): notifications out of order, a notification for
// a step not yet begun, an abort in the middle of a step, and the checks on notifications from
// other processes.
#include <catch2/catch.hpp>

#include "tensorplay/pipelining/runtime/stage_worker.h"
#include "tensorplay/schedules/policy.h"
#include "tensorplay/schedules/schedule_kind.h"
#include "tensorplay/tensor.h"
#include "tensorplay/transport/local_channel.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace sc = tensorplay::schedules;
using pp::Direction;

namespace {

constexpr int64_t kDim = 4;
constexpr int kMicrobatches = 4;

/// The worker of `rank` (of two) hosting `stage` on `channel`, following `order`'s row for it.
pp::StageWorker two_rank_worker(int rank, pp::PipelineStage& stage, const sc::PipelineOrder& order,
                                std::shared_ptr<tp::transport::LocalChannel> channel) {
  return pp::StageWorker{rank,
                         {&stage},
                         2,
                         kMicrobatches,
                         sc::make_static_order_policy(order[rank]),
                         sc::make_static_order_policy(order[rank]),
                         std::move(channel),
                         std::chrono::seconds(5),
                         {0, 1},
                         rank};
}

/// Rank 1 of a two-rank GPipe: stage 1 (the last), fed by a stand-in for rank 0 that posts its
/// outputs on a local channel.
struct LastRank {
  std::shared_ptr<pp::PipelineStage> stage =
      std::make_shared<pp::PipelineStage>(tp::nn::Linear(kDim, kDim).ptr(), 1, 2, tp::cpu(),
                                          std::vector<tp::Tensor>{tp::zeros({2, kDim})});
  std::shared_ptr<tp::transport::LocalChannel> channel =
      std::make_shared<tp::transport::LocalChannel>();
  sc::PipelineOrder order = sc::generate_order(sc::ScheduleKind::GPipe, 2, 1, kMicrobatches);
  pp::StageWorker worker = two_rank_worker(1, *stage, order, channel);
  std::vector<std::string> ran;

  std::shared_ptr<pp::StepData> step_data(uint64_t step) {
    auto d = std::make_shared<pp::StepData>();
    d->step = step;
    d->loss_fn = tp::nn::mse_loss;
    for (int mb = 0; mb < kMicrobatches; ++mb) d->targets.push_back(tp::zeros({2, kDim}));
    return d;
  }
  /// Rank 0's part: posts microbatch `mb`'s activations and returns the notification.
  pp::Notification from_rank0(uint64_t step, int mb) {
    auto descriptors = channel->send(1, pp::pipeline_key(0, {step, 1, Direction::Forward, mb}),
                                     {tp::randn({2, kDim})});
    return {step, 1, Direction::Forward, mb, 0, descriptors};
  }
  void arrive(const pp::Notification& n) {
    bool now = worker.post_receive(n, [](const pp::Notification&) {});
    REQUIRE(now);  // the local channel hands over at once
    worker.on_arrival(n);
  }
  void run() {
    worker.run_ready([](const pp::Notification&) {},
                     [this](const char* event, const sc::Action& a) {
                       if (std::string(event) == "start") ran.push_back(sc::to_string(a));
                     });
  }
};

}  // namespace

TEST_CASE("StageWorker runs its order whatever order notifications arrive in", "[stage_worker]") {
  LastRank r;
  r.worker.begin_step(r.step_data(1));
  for (int mb = kMicrobatches - 1; mb >= 1; --mb) {
    r.arrive(r.from_rank0(1, mb));
    r.run();
    CHECK(r.ran.empty());  // GPipe's order starts with microbatch 0
  }
  r.arrive(r.from_rank0(1, 0));
  r.run();
  std::vector<std::string> want;
  for (const sc::Action& a : r.order[1]) want.push_back(sc::to_string(a));
  CHECK(r.ran == want);
  CHECK(r.worker.finished());
}

TEST_CASE("StageWorker keeps a notification for a step it has not begun", "[stage_worker]") {
  LastRank r;
  r.worker.begin_step(r.step_data(1));
  for (int mb = 0; mb < kMicrobatches; ++mb) r.arrive(r.from_rank0(1, mb));
  // Step 2's first input arrives before this rank has finished step 1.
  pp::Notification early = r.from_rank0(2, 0);
  r.arrive(early);
  r.run();
  REQUIRE(r.worker.finished());
  r.ran.clear();
  r.worker.begin_step(r.step_data(2));
  r.run();
  REQUIRE(!r.ran.empty());
  CHECK(r.ran.front() == "1F0");  // the early input was kept for step 2
}

TEST_CASE("StageWorker aborted midway drops the step and runs the next one", "[stage_worker]") {
  LastRank r;
  r.worker.begin_step(r.step_data(1));
  r.arrive(r.from_rank0(1, 0));
  r.arrive(r.from_rank0(1, 1));
  r.run();
  CHECK(r.stage->stashed_microbatches() == 2);
  CHECK(r.worker.aborted_step() == 0);
  r.worker.abort_step(1);
  CHECK(r.worker.aborted_step() == 1);
  CHECK(r.stage->stashed_microbatches() == 0);
  CHECK(r.worker.running().empty());
  r.ran.clear();
  r.worker.begin_step(r.step_data(2));
  for (int mb = 0; mb < kMicrobatches; ++mb) r.arrive(r.from_rank0(2, mb));
  r.run();
  CHECK(r.worker.finished());
  CHECK(r.ran.size() == r.order[1].size());
}

TEST_CASE("StageWorker checks notifications from other processes", "[stage_worker]") {
  LastRank r;
  pp::Notification good{3, 1, Direction::Forward, 2, 0, {}};
  good.tensors.push_back({{2, kDim}, tp::DType::Float32, 2 * kDim * 4, true});
  CHECK(r.worker.check_notification(good).accepted());
  auto with = [&](auto change) {
    pp::Notification n = good;
    change(n);
    return r.worker.check_notification(n);
  };
  // Noise: badly routed, counted only (no mismatch to fail a step with).
  auto noise = [&](auto change, const std::string& words) {
    pp::NotificationCheck check = with(change);
    CHECK_THAT(check.error, Catch::Contains(words));
    CHECK(check.mismatch.empty());
  };
  noise([](auto& n) { n.stage = 0; }, "not hosted by rank 1");
  noise([](auto& n) { n.microbatch = kMicrobatches; }, "microbatch out of range");
  noise([](auto& n) { n.source = 1; }, "stage 0 runs on rank 0");
  noise([](auto& n) { n.direction = Direction::Backward; }, "gets no gradient");
  noise([](auto& n) { n.step = 0; }, "step out of range");
  // Well routed, tensors that differ from what the stage was built for: a mismatch, in words.
  auto mismatch = [&](auto change, const std::string& words) {
    pp::NotificationCheck check = with(change);
    CHECK_THAT(check.error, Catch::StartsWith("input 1:2 of step 3: "));
    CHECK_THAT(check.mismatch, Catch::Equals(words));
  };
  mismatch([](auto& n) { n.tensors.clear(); }, "0 tensors, stage 1 expects 1");
  mismatch([](auto& n) { n.tensors[0].dtype = tp::DType::BFloat16; },
           "tensor 0 is bfloat16[2,4], stage 1 expects float32[2,4]");
  mismatch(
      [](auto& n) {
        n.tensors[0].shape = {2, kDim + 1};
      },
      "tensor 0 is float32[2,5], stage 1 expects float32[2,4]");
  mismatch(
      [](auto& n) {
        n.tensors[0].shape = {3, 2, kDim};
      },
      "tensor 0 is float32[3,2,4], stage 1 expects float32[2,4]");
  mismatch([](auto& n) { n.tensors[0].defined = false; },
           "tensor 0 is absent, stage 1 expects float32[2,4]");
  // The batch dimension may differ (an uneven last microbatch), and the expectation follows it.
  CHECK(with([](auto& n) { n.tensors[0].shape = {1, kDim}; }).accepted());
  CHECK(with([](auto& n) {
          n.tensors[0].shape = {1, kDim + 1};
        }).mismatch == "tensor 0 is float32[1,5], stage 1 expects float32[1,4]");
}

TEST_CASE("StageWorker keeps a bounded number of rejections for its actor", "[stage_worker]") {
  LastRank r;
  pp::Notification n{3, 1, Direction::Forward, 2, 0, {}};
  n.tensors.push_back({{2, kDim}, tp::DType::BFloat16, 2 * kDim * 2, true});
  CHECK(r.worker.keep_rejection(n, "tensor 0 differs"));  // the first: tell the actor
  for (int i = 1; i < 1000; ++i) CHECK_FALSE(r.worker.keep_rejection(n, "tensor 0 differs"));
  std::vector<pp::StageWorker::Rejection> kept = r.worker.take_rejections();
  REQUIRE(kept.size() == 16);
  CHECK(kept[0].note.step == 3);
  CHECK(kept[0].note.tensors.empty());  // only the header is kept
  CHECK(kept[0].mismatch == "tensor 0 differs");
  CHECK(r.worker.take_rejections().empty());
  CHECK(r.worker.keep_rejection(n, "again"));  // taken: the next one tells the actor again
}

TEST_CASE("StageWorker::accept is one entry point: checked, posted, or refused with why",
          "[stage_worker]") {
  LastRank r;
  r.worker.begin_step(r.step_data(1));
  // From this process (not checked): the local channel hands the tensors over at once.
  pp::Acceptance now = r.worker.accept(r.from_rank0(1, 0), false, [](const pp::Notification&) {});
  CHECK(now.kind == pp::Acceptance::Kind::Arrived);
  // From another process: a mismatch is refused with the words that fail the step.
  pp::Notification wrong = r.from_rank0(1, 1);
  wrong.tensors[0].shape = {2, kDim + 1};
  pp::Acceptance refused = r.worker.accept(wrong, true, [](const pp::Notification&) {});
  CHECK(refused.kind == pp::Acceptance::Kind::Rejected);
  CHECK(refused.mismatch == "tensor 0 is float32[2,5], stage 1 expects float32[2,4]");
  // Badly routed noise: refused, no mismatch to fail a step with.
  pp::Notification noise = r.from_rank0(1, 2);
  noise.stage = 0;
  pp::Acceptance counted = r.worker.accept(noise, true, [](const pp::Notification&) {});
  CHECK(counted.kind == pp::Acceptance::Kind::Rejected);
  CHECK(counted.mismatch.empty());
  CHECK_THAT(counted.error, Catch::Contains("not hosted by rank 1"));
}

TEST_CASE("StageWorker rebuilds a recomputing stage's activations while it waits for a gradient",
          "[stage_worker]") {
  // Rank 0 of a two-rank 1F1B: stage 0 recomputes its blocks; its order is 0F0 0F1 0B0 0F2 ...
  tp::manual_seed(3);
  auto module = tp::nn::Sequential(tp::nn::Linear(kDim, kDim), tp::nn::Linear(kDim, kDim)).ptr();
  auto stage = std::make_shared<pp::PipelineStage>(module, 0, 2, tp::cpu(),
                                                   std::vector<tp::Tensor>{tp::zeros({2, kDim})});
  stage->set_recompute(pp::RecomputePolicy::full());
  REQUIRE_FALSE(stage->recomputed_modules().empty());
  auto channel = std::make_shared<tp::transport::LocalChannel>();
  sc::PipelineOrder order = sc::generate_order(sc::ScheduleKind::OneFOneB, 2, 1, kMicrobatches);
  pp::StageWorker worker = two_rank_worker(0, *stage, order, channel);
  auto data = std::make_shared<pp::StepData>();
  data->step = 1;
  for (int mb = 0; mb < kMicrobatches; ++mb)
    data->microbatch_inputs.push_back({tp::randn({2, kDim})});
  worker.begin_step(data);
  std::vector<std::string> ran;
  worker.run_ready([](const pp::Notification&) {},
                   [&](const char* event, const sc::Action& a) {
                     if (std::string(event) == "start") ran.push_back(sc::to_string(a));
                   });
  CHECK(ran == std::vector<std::string>{"0F0", "0F1"});  // then 0B0 waits for its gradient
  CHECK_FALSE(stage->can_recompute_ahead(0));            // rebuilt while waiting
  CHECK(stage->can_recompute_ahead(1));                  // the next backward's turn comes later
  worker.abort_step(1);
}

namespace {

/// y = 2x, counting its calls (a checkpointed one runs again when its backward recomputes).
class CountingImpl : public tp::nn::Module {
 public:
  explicit CountingImpl(int* calls) : calls_(calls) {}
  tp::Tensor forward(const tp::Tensor& x) override {
    ++*calls_;
    return x * 2.0f;
  }
  std::string type_name() const override { return "Counting"; }

 private:
  int* calls_;
};
TENSORPLAY_MODULE(Counting);

}  // namespace

TEST_CASE("StageWorker's recomputing last stage keeps the activations for the backward next",
          "[stage_worker][recompute]") {
  // Rank 1 of a two-rank 1F1B: 1F0 1B0 1F1 1B1 ... each F right before its own backward, whose
  // recomputation would run the F again at once: it keeps the activations, and runs each F once.
  int calls = 0;
  auto module = tp::nn::Sequential(Counting(&calls), tp::nn::Linear(kDim, kDim)).ptr();
  auto stage = std::make_shared<pp::PipelineStage>(module, 1, 2, tp::cpu(),
                                                   std::vector<tp::Tensor>{tp::zeros({2, kDim})});
  // One segment: a backward right after its F would rebuild all of it at once.
  stage->set_recompute(pp::RecomputePolicy::by_type({"Counting"}));
  REQUIRE(stage->recomputed_modules() == std::vector<std::string>{"0"});
  calls = 0;  // the stage's construction ran the module once for its output shapes
  auto channel = std::make_shared<tp::transport::LocalChannel>();
  const sc::PipelineOrder order =
      sc::generate_order(sc::ScheduleKind::OneFOneB, 2, 1, kMicrobatches);
  pp::StageWorker worker = two_rank_worker(1, *stage, order, channel);
  auto data = std::make_shared<pp::StepData>();
  data->step = 1;
  data->training = true;
  data->loss_fn = tp::nn::mse_loss;
  for (int mb = 0; mb < kMicrobatches; ++mb) data->targets.push_back(tp::zeros({2, kDim}));
  worker.begin_step(data);
  for (int mb = 0; mb < kMicrobatches; ++mb) {
    const pp::Notification n{1,
                             1,
                             Direction::Forward,
                             mb,
                             0,
                             channel->send(1, pp::pipeline_key(0, {1, 1, Direction::Forward, mb}),
                                           {tp::randn({2, kDim})})};
    REQUIRE(worker.post_receive(n, [](const pp::Notification&) {}));
    worker.on_arrival(n);
  }
  worker.run_ready([](const pp::Notification&) {});
  REQUIRE(worker.finished());
  CHECK(calls == kMicrobatches);  // recomputing in each backward would make it twice that
  // Without the rule's condition (GPipe: the Fs first), each backward recomputes.
  calls = 0;
  stage->clear();
  stage->forward(0, {tp::randn({2, kDim})});
  stage->forward(1, {tp::randn({2, kDim})});
  stage->compute_loss(1, tp::zeros({2, kDim}), tp::nn::mse_loss);
  stage->backward(1, {});
  CHECK(calls == 3);
}
