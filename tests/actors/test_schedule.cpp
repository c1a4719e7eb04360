// Tests for schedule.h: every schedule's losses and gradients equal those of the unpipelined model
// with the same microbatch accumulation, over several optimizer steps; and bad input errors.
#include <catch2/catch.hpp>
#include <cmath>
#include <utility>

#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace sc = tensorplay::schedules;

namespace {

constexpr int64_t kDim = 16;

std::shared_ptr<tp::nn::Module> make_block() {
  return tp::nn::Sequential(tp::nn::Linear(kDim, kDim), tp::nn::ReLU()).ptr();
}

// A reference model (blocks chained) and a pipelined copy: one stage per block.
struct Setup {
  std::vector<std::shared_ptr<tp::nn::Module>> reference;
  std::vector<std::shared_ptr<pp::PipelineStage>> stages;

  Setup(int num_stages, int64_t microbatch_size) {
    tp::manual_seed(1234);
    for (int i = 0; i < num_stages; ++i) reference.push_back(make_block());
    for (int i = 0; i < num_stages; ++i) {
      auto copy = make_block();
      for (auto& [name, p] : reference[i]->named_parameters()) copy->find_tensor(name).copy_(p);
      stages.push_back(std::make_shared<pp::PipelineStage>(
          copy, i, num_stages, tp::cpu(),
          std::vector<tp::Tensor>{tp::zeros({microbatch_size, kDim})}));
    }
  }

  std::vector<tp::Tensor> reference_params() const {
    std::vector<tp::Tensor> out;
    for (auto& m : reference)
      for (auto& p : m->parameters()) out.push_back(p);
    return out;
  }

  // Unpipelined: the same microbatches, each loss scaled by 1/n before its backward.
  std::vector<float> reference_step(const tp::Tensor& x, const tp::Tensor& y, int n) {
    std::vector<float> losses;
    int64_t rows = x.size(0) / n;
    for (int mb = 0; mb < n; ++mb) {
      tp::Tensor h = x.slice0(mb * rows, (mb + 1) * rows);
      for (auto& m : reference) h = (*m)(h);
      tp::Tensor loss = tp::nn::mse_loss(h, y.slice0(mb * rows, (mb + 1) * rows));
      losses.push_back(loss.item());
      (loss * (1.0f / n)).backward();
    }
    return losses;
  }
};

void check_close(const std::vector<float>& got, const std::vector<float>& want, double rel) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    double tol = rel * std::max(1.0, std::fabs(static_cast<double>(want[i])));
    REQUIRE(std::fabs(static_cast<double>(got[i]) - want[i]) <= tol);
  }
}

std::unique_ptr<pp::PipelineSchedule> make_schedule(
    sc::ScheduleKind kind, std::vector<std::shared_ptr<pp::PipelineStage>> stages, int n) {
  return std::make_unique<pp::PipelineSchedule>(std::move(stages), n, tp::nn::mse_loss, kind);
}

void run_equivalence(sc::ScheduleKind kind, int num_stages, int n) {
  const int64_t batch = 2 * n;
  Setup setup(num_stages, batch / n);
  auto schedule = make_schedule(kind, setup.stages, n);
  auto params = pp::parameters(setup.stages);
  auto ref_params = setup.reference_params();
  REQUIRE(params.size() == ref_params.size());
  tp::optim::SGD opt(params, {.lr = 0.05f});
  tp::optim::SGD ref_opt(ref_params, {.lr = 0.05f});
  tp::Generator data(99);
  for (int step = 0; step < 3; ++step) {
    tp::Tensor x = tp::randn({batch, kDim}, {}, &data);
    tp::Tensor y = tp::randn({batch, kDim}, {}, &data);
    std::vector<tp::Tensor> losses;
    schedule->step({x}, {.target = y, .losses = &losses});
    std::vector<float> ref_losses = setup.reference_step(x, y, n);
    std::vector<float> got;
    for (auto& l : losses) got.push_back(l.item());
    check_close(got, ref_losses, 1e-5);
    for (size_t i = 0; i < params.size(); ++i) {
      REQUIRE(params[i].grad().defined());
      check_close(params[i].grad().to_vector(), ref_params[i].grad().to_vector(), 1e-5);
    }
    opt.step();
    opt.zero_grad();
    ref_opt.step();
    ref_opt.zero_grad();
  }
}

}  // namespace

TEST_CASE("GPipe and 1F1B match the unpipelined model", "[schedule]") {
  for (auto kind : {sc::ScheduleKind::GPipe, sc::ScheduleKind::OneFOneB}) {
    for (int stages : {2, 4}) {
      for (int n : {4, 8}) {
        DYNAMIC_SECTION(sc::schedule_name(kind) << " stages=" << stages << " microbatches=" << n) {
          run_equivalence(kind, stages, n);
        }
      }
    }
  }
}

TEST_CASE("multi-stage schedules match the unpipelined model", "[schedule]") {
  for (auto kind : {sc::ScheduleKind::Interleaved1F1B, sc::ScheduleKind::LoopedBFS,
                    sc::ScheduleKind::InterleavedZeroBubble, sc::ScheduleKind::ZBVZeroBubble,
                    sc::ScheduleKind::DualPipeV, sc::ScheduleKind::VHalf, sc::ScheduleKind::VMin}) {
    DYNAMIC_SECTION(sc::schedule_name(kind) << " stages=4 microbatches=8") {
      run_equivalence(kind, 4, 8);
    }
  }
}

TEST_CASE("V-Half and V-Min match the unpipelined model on 3 and 4 ranks", "[schedule]") {
  for (auto kind : {sc::ScheduleKind::VHalf, sc::ScheduleKind::VMin}) {
    for (auto [stages, n] : {std::pair{6, 7}, std::pair{8, 8}, std::pair{8, 12}}) {
      DYNAMIC_SECTION(sc::schedule_name(kind) << " stages=" << stages << " microbatches=" << n) {
        run_equivalence(kind, stages, n);
      }
    }
  }
}

TEST_CASE("a batch smaller than the microbatch count is a clear error", "[schedule][errors]") {
  Setup setup(2, 2);
  pp::Schedule1F1B schedule(setup.stages, 4, tp::nn::mse_loss);
  // 10 rows split as torch.tensor_split does (3, 3, 2, 2); 3 rows cannot make 4 microbatches.
  schedule.step({tp::randn({10, kDim})}, {.target = tp::randn({10, kDim})});
  CHECK_THROWS_WITH(schedule.step({tp::randn({3, kDim})}, {.target = tp::randn({3, kDim})}),
                    Catch::Contains("fewer than the 4 microbatches"));
}

TEST_CASE("1F1B with fewer microbatches than stages is a clear error", "[schedule][errors]") {
  Setup setup(4, 2);
  CHECK_THROWS_WITH(pp::Schedule1F1B(setup.stages, 2, tp::nn::mse_loss),
                    Catch::Contains("1F1B") && Catch::Contains("microbatches"));
}

TEST_CASE("input of the wrong shape for stage 0 is a clear error", "[schedule][errors]") {
  Setup setup(2, 2);
  pp::ScheduleGPipe schedule(setup.stages, 4, tp::nn::mse_loss);
  CHECK_THROWS_WITH(schedule.step({tp::randn({8, kDim + 1})}, {.target = tp::randn({8, kDim})}),
                    Catch::Contains("stage 0") && Catch::Contains("expected"));
  // The schedule is still usable after the error.
  std::vector<tp::Tensor> losses;
  schedule.step({tp::randn({8, kDim})}, {.target = tp::randn({8, kDim}), .losses = &losses});
  CHECK(losses.size() == 4);
}

TEST_CASE("a failure inside a stage reaches the caller and the schedule recovers",
          "[schedule][errors]") {
  Setup setup(2, 2);
  pp::ScheduleGPipe schedule(setup.stages, 4, [](const tp::Tensor& out, const tp::Tensor& y) {
    if (y.numel() != out.numel()) throw std::invalid_argument("target does not fit");
    return tp::nn::mse_loss(out, y);
  });
  CHECK_THROWS_AS(schedule.step({tp::randn({8, kDim})}, {.target = tp::randn({8, kDim + 2})}),
                  pp::PipelineError);
  CHECK_THROWS_WITH(schedule.step({tp::randn({8, kDim})}, {.target = tp::randn({8, kDim + 2})}),
                    Catch::Contains("rank 1") && Catch::Contains("target does not fit"));
  std::vector<tp::Tensor> losses;
  schedule.step({tp::randn({8, kDim})}, {.target = tp::randn({8, kDim}), .losses = &losses});
  CHECK(losses.size() == 4);
}

TEST_CASE("training without a target is a clear error, eval needs none", "[schedule][errors]") {
  Setup setup(2, 2);
  pp::ScheduleGPipe schedule(setup.stages, 2, tp::nn::mse_loss);
  CHECK_THROWS_WITH(schedule.step({tp::randn({4, kDim})}), Catch::Contains("target"));
  tp::Tensor out = schedule.eval({tp::randn({4, kDim})});
  CHECK(out.shape() == tp::Shape{4, kDim});
}

TEST_CASE("gradients accumulate across steps without zero_grad", "[schedule]") {
  Setup setup(2, 2);
  pp::Schedule1F1B schedule(setup.stages, 2, tp::nn::mse_loss);
  tp::Tensor x = tp::randn({4, kDim}), y = tp::randn({4, kDim});
  schedule.step({x}, {.target = y});
  auto p = pp::parameters(setup.stages)[0];
  auto once = p.grad().to_vector();
  schedule.step({x}, {.target = y});
  auto twice = p.grad().to_vector();
  for (size_t i = 0; i < once.size(); ++i) CHECK(twice[i] == Approx(2 * once[i]).epsilon(1e-5));
}

TEST_CASE("a last stage that returns its loss gives one value per microbatch", "[schedule]") {
  tp::manual_seed(5);
  auto first = make_block();
  auto last = tp::nn::Sequential(tp::nn::Linear(kDim, 1)).ptr();
  struct MeanOf : tp::nn::Module {
    explicit MeanOf(std::shared_ptr<tp::nn::Module> m) : inner(register_module("inner", m)) {}
    tp::Tensor forward(const tp::Tensor& x) override { return tp::mean((*inner)(x)); }
    std::shared_ptr<tp::nn::Module> inner;
  };
  std::vector<std::shared_ptr<pp::PipelineStage>> stages = {
      std::make_shared<pp::PipelineStage>(first, 0, 2, tp::cpu(),
                                          std::vector<tp::Tensor>{tp::zeros({2, kDim})}),
      std::make_shared<pp::PipelineStage>(std::make_shared<MeanOf>(last), 1, 2, tp::cpu(),
                                          std::vector<tp::Tensor>{tp::zeros({2, kDim})})};
  pp::ScheduleGPipe schedule(stages, 4,
                             [](const tp::Tensor& out, const tp::Tensor&) { return out; });
  std::vector<tp::Tensor> losses;
  tp::Tensor out =
      schedule.step({tp::randn({8, kDim})}, {.target = tp::zeros({8, 1}), .losses = &losses});
  REQUIRE(out.shape() == tp::Shape{4});
  for (int mb = 0; mb < 4; ++mb) CHECK(out.to_vector()[mb] == losses.at(mb).item());
  CHECK(schedule.eval({tp::randn({8, kDim})}).shape() == tp::Shape{4});
}

TEST_CASE("a parameter shared by stages on two ranks is a clear error", "[schedule][errors]") {
  auto shared = make_block();
  std::vector<std::shared_ptr<pp::PipelineStage>> stages;
  for (int i = 0; i < 2; ++i)
    stages.push_back(std::make_shared<pp::PipelineStage>(
        shared, i, 2, tp::cpu(), std::vector<tp::Tensor>{tp::zeros({2, kDim})}));
  CHECK_THROWS_WITH(pp::Schedule1F1B(stages, 2, tp::nn::mse_loss),
                    Catch::Contains("same tensor") && Catch::Contains("different ranks"));
}

TEST_CASE("a target whose batch differs from the input's is a clear error", "[schedule][errors]") {
  Setup setup(2, 2);
  pp::ScheduleGPipe schedule(setup.stages, 4, tp::nn::mse_loss);
  CHECK_THROWS_WITH(schedule.step({tp::randn({8, kDim})}, {.target = tp::randn({12, kDim})}),
                    Catch::Contains("target's batch (12 rows)") && Catch::Contains("(8 rows)"));
  std::vector<tp::Tensor> losses;
  schedule.step({tp::randn({8, kDim})}, {.target = tp::randn({8, kDim}), .losses = &losses});
  CHECK(losses.size() == 4);
}
