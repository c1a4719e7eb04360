// Tests for the data-parallel gradient reducer (tensorplay/pipelining/runtime/detail/grad_reducer.h)
// in one process, with a stand-in all-reduce: buckets by stage, dtype and size in the order
// backward finishes them, handed over during the backward when overlapping, averaged gradients
// equal to the local ones for identical replicas, no_sync steps left alone, failures reported.
#include <catch2/catch.hpp>
#include <mutex>

#include "tensorplay/pipelining/runtime/detail/grad_reducer.h"
#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace sc = tensorplay::schedules;

namespace {

constexpr int64_t kDim = 16;

// Two Linear layers per stage, `num_stages` stages, every stage in this process.
std::vector<std::shared_ptr<pp::PipelineStage>> make_stages(int num_stages, uint64_t seed) {
  tp::manual_seed(seed);
  std::vector<std::shared_ptr<pp::PipelineStage>> stages;
  for (int i = 0; i < num_stages; ++i) {
    auto module =
        tp::nn::Sequential(tp::nn::Linear(kDim, kDim), tp::nn::Tanh(), tp::nn::Linear(kDim, kDim))
            .ptr();
    stages.push_back(std::make_shared<pp::PipelineStage>(
        module, i, num_stages, tp::cpu(), std::vector<tp::Tensor>{tp::zeros({2, kDim})}));
  }
  return stages;
}

// What the stand-in all-reduce saw: the bucket sizes in call order, and whether each call came
// before the schedule's step returned.
struct Calls {
  std::mutex mutex;
  std::vector<int64_t> numels;
  std::vector<uint64_t> ids;
};

// Two identical replicas: the sum is twice the local gradient, the mean the local one.
pp::detail::FlatAllReduce doubling(Calls& calls) {
  return [&calls](tp::Tensor& flat, uint64_t call) {
    {
      std::lock_guard lock(calls.mutex);
      calls.numels.push_back(flat.numel());
      calls.ids.push_back(call);
    }
    flat.copy_(flat * 2.0f);
  };
}

std::vector<std::vector<float>> grads_of(const std::vector<std::shared_ptr<pp::PipelineStage>>& s) {
  std::vector<std::vector<float>> out;
  for (const auto& stage : s)
    for (const auto& [name, p] : stage->module().named_parameters())
      out.push_back(p.grad().defined() ? p.grad().to_vector() : std::vector<float>{});
  return out;
}

}  // namespace

TEST_CASE("the reducer averages identical replicas back to the local gradients, overlapped",
          "[grad_reducer]") {
  for (auto kind : {sc::ScheduleKind::OneFOneB, sc::ScheduleKind::ZBVZeroBubble}) {
    const int num_stages = sc::is_single_stage_per_rank(kind) ? 2 : 4;
    auto stages = make_stages(num_stages, 3), plain = make_stages(num_stages, 3);
    pp::PipelineSchedule schedule(stages, 4, tp::nn::mse_loss, kind);
    pp::PipelineSchedule reference(plain, 4, tp::nn::mse_loss, kind);
    Calls calls;
    // A bucket holds one weight (256 floats) or the bias and weight of one layer (272).
    pp::detail::GradReducer reducer(pp::stage_pointers(stages), 4, 2, {.bucket_cap_bytes = 272 * 4},
                                    doubling(calls), "test");
    tp::Tensor x = tp::randn({8, kDim}), y = tp::randn({8, kDim});
    for (uint64_t step = 1; step <= 2; ++step) {
      reducer.begin_step(step, true, {});
      schedule.step({x}, {.target = y});
      reducer.finish_step(std::chrono::steady_clock::now() + std::chrono::seconds(10));
      reference.step({x}, {.target = y});
      CHECK(grads_of(stages) == grads_of(plain));  // x2 / 2 is exact
      pp::DataParallelStats st = reducer.stats();
      CHECK(st.synced);
      CHECK(st.buckets == 2 * num_stages);
      // Each stage's buckets are handed over by its last backward action, before the step ends.
      CHECK(st.buckets_overlapped == 2 * num_stages);
      CHECK(st.bytes == num_stages * 2 * (kDim * kDim + kDim) * 4);
      for (auto& s : {stages, plain})
        for (const auto& stage : s)
          for (auto& [name, p] : stage->module().named_parameters()) p.set_grad(tp::Tensor());
    }
    // Buckets run in one order on every replica: later stages first, each stage's layers last
    // to first (the second layer's bias and weight, then the first layer's), a call id each.
    REQUIRE(calls.numels.size() == 4u * num_stages);
    for (size_t i = 0; i < calls.numels.size(); ++i) CHECK(calls.numels[i] == kDim * kDim + kDim);
    // Call ids step * (jobs rounded up to a power of two) + bucket: consecutive steps differ in
    // the low bits the transfer tags keep.
    const uint64_t stride = 2 * num_stages;
    CHECK(calls.ids[0] == stride);  // step 1, bucket 0
    CHECK(calls.ids[1] == stride + 1);
    CHECK(calls.ids[2 * num_stages] == 2 * stride);
  }
}

TEST_CASE("without overlap nothing is handed over during the backward", "[grad_reducer]") {
  auto stages = make_stages(2, 5);
  pp::Schedule1F1B schedule(stages, 4, tp::nn::mse_loss);
  Calls calls;
  pp::detail::GradReducer reducer(pp::stage_pointers(stages), 4, 2, {.overlap = false},
                                  doubling(calls), "test");
  CHECK(reducer.layout() == "1:544:float32,0:544:float32,");  // one bucket per stage
  reducer.begin_step(1, true, {});
  schedule.step({tp::randn({8, kDim})}, {.target = tp::randn({8, kDim})});
  CHECK(calls.numels.empty());
  reducer.finish_step(std::chrono::steady_clock::now() + std::chrono::seconds(10));
  CHECK(reducer.stats().buckets_overlapped == 0);
  CHECK(calls.numels == std::vector<int64_t>{544, 544});
}

TEST_CASE("a step under no_sync averages nothing", "[grad_reducer]") {
  auto stages = make_stages(2, 6);
  pp::Schedule1F1B schedule(stages, 2, tp::nn::mse_loss);
  Calls calls;
  pp::detail::GradReducer reducer(pp::stage_pointers(stages), 2, 2, {}, doubling(calls), "test");
  reducer.begin_step(1, false, {});
  schedule.step({tp::randn({4, kDim})}, {.target = tp::randn({4, kDim})});
  reducer.finish_step(std::chrono::steady_clock::now() + std::chrono::seconds(10));
  CHECK(calls.numels.empty());
  CHECK_FALSE(reducer.stats().synced);
}

TEST_CASE("a failing all-reduce fails the step naming why", "[grad_reducer]") {
  auto stages = make_stages(2, 7);
  pp::Schedule1F1B schedule(stages, 2, tp::nn::mse_loss);
  pp::detail::GradReducer reducer(
      pp::stage_pointers(stages), 2, 2, {},
      [](tp::Tensor&, uint64_t) { throw std::runtime_error("replica 1 is gone"); }, "test");
  reducer.begin_step(1, true, {});
  schedule.step({tp::randn({4, kDim})}, {.target = tp::randn({4, kDim})});
  CHECK_THROWS_WITH(
      reducer.finish_step(std::chrono::steady_clock::now() + std::chrono::seconds(10)),
      Catch::Contains("data-parallel gradient averaging failed") &&
          Catch::Contains("replica 1 is gone") && Catch::Contains("zero_grad"));
  CHECK_THROWS_WITH(pp::detail::GradReducer(pp::stage_pointers(stages), 2, 2,
                                            {.bucket_cap_bytes = 0}, nullptr, "test"),
                    Catch::Contains("bucket_cap_bytes must be positive"));
}
