// Tests for step(args, kwargs, options) in schedule.h: keyword inputs traced by pipeline() or
// taken by a hand-built stage, chunked or replicated, through every schedule; uneven microbatches
// matching the unsplit model's mean loss; every output of the last stage, merged as the
// output_merge_spec says.
#include <catch2/catch.hpp>
#include <cmath>
#include <map>

#include "tensorplay/pipelining/build_stage.h"
#include "tensorplay/pipelining/pipeline.h"
#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace sc = tensorplay::schedules;

namespace {

constexpr int64_t kDim = 8;

bool close(const std::vector<float>& a, const std::vector<float>& b, double rel = 1e-5) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    double tol = rel * std::max(1.0, std::fabs(static_cast<double>(b[i])));
    if (std::fabs(static_cast<double>(a[i]) - b[i]) > tol) return false;
  }
  return true;
}

struct Block : tp::nn::Module {
  Block() {
    net = register_module("net", tp::nn::Sequential(tp::nn::Linear(kDim, kDim), tp::nn::Tanh()));
  }
  tp::Tensor forward(const tp::Tensor& x) override { return net(x); }
  tp::nn::Sequential net;
};

/// forward(x, y=..., scale=...): `y` is per row (chunked), `scale` one row for the whole batch
/// (replicated), read in the last block so it travels through the stages before.
struct KwargsModel : tp::nn::Module {
  KwargsModel() {
    for (int i = 0; i < 4; ++i)
      blocks.push_back(register_module("block" + std::to_string(i), std::make_shared<Block>()));
  }
  tp::Tensor forward_args(const std::vector<tp::Tensor>& args,
                          const tp::nn::TensorDict& kwargs) override {
    tp::Tensor x = (*blocks[0])(args[0] + kwargs.at("y"));
    x = (*blocks[1])(x);
    x = (*blocks[2])(x);
    return (*blocks[3])(x)*kwargs.at("scale");
  }
  std::vector<std::shared_ptr<Block>> blocks;
};

pp::PipelineOptions four_stages() {
  return {.split_spec = {{"block1", pp::SplitPoint::Beginning},
                         {"block2", pp::SplitPoint::Beginning},
                         {"block3", pp::SplitPoint::Beginning}}};
}

void check_grads_match(const std::vector<std::shared_ptr<pp::PipelineStage>>& stages,
                       tp::nn::Module& twin) {
  size_t checked = 0;
  for (const auto& s : stages)
    for (const auto& [name, p] : s->module().named_parameters()) {
      INFO("stage " << s->stage_index() << " parameter " << name);
      REQUIRE(p.grad().defined());
      CHECK(close(p.grad().to_vector(), twin.find_tensor(name).grad().to_vector()));
      ++checked;
    }
  CHECK(checked == twin.parameters().size());
}

void check_kwargs_schedule(sc::ScheduleKind kind) {
  const int n = 4;
  const int64_t batch = 8;
  tp::manual_seed(21);
  auto model = std::make_shared<KwargsModel>();
  auto twin = std::make_shared<KwargsModel>();
  twin->load_state_dict(model->state_dict());
  auto pipe = pp::pipeline(model, {tp::zeros({batch / n, kDim})},
                           {{"y", tp::zeros({batch / n, kDim})}, {"scale", tp::zeros({1, kDim})}},
                           four_stages());
  REQUIRE(pipe.num_stages() == 4);
  auto stages = pp::build_stages(pipe, {tp::cpu()});
  pp::PipelineSchedule schedule(
      stages, n, tp::nn::mse_loss, kind,
      {.kwargs_chunk_spec = {{"scale", pp::Replicate{}}, {"y", pp::TensorChunkSpec{0}}}});
  tp::Tensor x = tp::randn({batch, kDim}), y = tp::randn({batch, kDim});
  tp::Tensor scale = tp::randn({1, kDim}), target = tp::randn({batch, kDim});
  std::vector<tp::Tensor> losses;
  pp::StepOutput out =
      schedule.step({x}, {{"y", y}, {"scale", scale}}, {.target = target, .losses = &losses});

  REQUIRE(losses.size() == static_cast<size_t>(n));
  std::vector<tp::Tensor> outputs;
  for (int mb = 0; mb < n; ++mb) {
    const int64_t rows = batch / n;
    tp::Tensor o =
        twin->forward_args({x.slice0(mb * rows, (mb + 1) * rows)},
                           {{"y", y.slice0(mb * rows, (mb + 1) * rows)}, {"scale", scale}});
    tp::Tensor loss = tp::nn::mse_loss(o, target.slice0(mb * rows, (mb + 1) * rows));
    CHECK(losses[mb].item() == Approx(loss.item()).epsilon(1e-5));
    (loss * (1.0f / n)).backward();
    outputs.push_back(o.detach());
  }
  REQUIRE(out.outputs.size() == 1);
  CHECK(close(out.outputs[0].to_vector(), tp::cat(outputs, 0).to_vector()));
  REQUIRE(out.microbatch_outputs.size() == static_cast<size_t>(n));
  check_grads_match(stages, *twin);
}

/// A hand-built first stage whose module takes a keyword input itself.
struct AddBias : tp::nn::Module {
  AddBias() { lin = register_module("lin", tp::nn::Linear(kDim, kDim)); }
  tp::Tensor forward_args(const std::vector<tp::Tensor>& args,
                          const tp::nn::TensorDict& kwargs) override {
    return lin(args[0]) + kwargs.at("bias");
  }
  tp::Tensor forward(const tp::Tensor& x) override { return lin(x); }
  tp::nn::Linear lin{nullptr};
};

}  // namespace

TEST_CASE("traced keyword inputs, chunked and replicated, run through every schedule",
          "[schedule][kwargs]") {
  for (auto kind : sc::all_schedule_kinds()) {
    DYNAMIC_SECTION(sc::schedule_name(kind)) { check_kwargs_schedule(kind); }
  }
}

TEST_CASE("a hand-built first stage gets its keyword inputs", "[schedule][kwargs]") {
  tp::manual_seed(22);
  auto first = std::make_shared<AddBias>();
  auto last = tp::nn::Sequential(tp::nn::Linear(kDim, kDim)).ptr();
  std::vector<std::shared_ptr<pp::PipelineStage>> stages = {
      std::make_shared<pp::PipelineStage>(
          first, 0, 2, tp::cpu(), std::vector<pp::TensorMeta>{pp::TensorMeta{tp::Shape{2, kDim}}},
          std::vector<pp::TensorMeta>{pp::TensorMeta{tp::Shape{2, kDim}}}),
      std::make_shared<pp::PipelineStage>(last, 1, 2, tp::cpu(),
                                          std::vector<tp::Tensor>{tp::zeros({2, kDim})})};
  pp::Schedule1F1B schedule(stages, 2, tp::nn::mse_loss,
                            {.kwargs_chunk_spec = {{"bias", pp::Replicate{}}}});
  tp::Tensor x = tp::randn({4, kDim}), bias = tp::randn({kDim});
  pp::StepOutput out = schedule.eval({x}, {{"bias", bias}});
  tp::Tensor want = (*last)(first->forward_args({x}, {{"bias", bias}}));
  REQUIRE(out.outputs.size() == 1);
  CHECK(close(out.outputs[0].to_vector(), want.to_vector()));
}

TEST_CASE("an uneven batch trains like the unsplit model's mean loss", "[schedule][uneven]") {
  for (auto kind :
       {sc::ScheduleKind::GPipe, sc::ScheduleKind::OneFOneB, sc::ScheduleKind::Interleaved1F1B,
        sc::ScheduleKind::ZBVZeroBubble, sc::ScheduleKind::DualPipeV}) {
    DYNAMIC_SECTION(sc::schedule_name(kind)) {
      tp::manual_seed(23);
      auto model = std::make_shared<KwargsModel>();
      auto twin = std::make_shared<KwargsModel>();
      twin->load_state_dict(model->state_dict());
      const int n = 4;
      const int64_t batch = 10;  // 3, 3, 2, 2 rows, as torch.tensor_split
      auto pipe = pp::pipeline(model, {tp::zeros({3, kDim})},
                               {{"y", tp::zeros({3, kDim})}, {"scale", tp::zeros({1, kDim})}},
                               four_stages());
      auto stages = pp::build_stages(pipe, {tp::cpu()});
      pp::PipelineSchedule schedule(stages, n, tp::nn::mse_loss, kind,
                                    {.kwargs_chunk_spec = {{"scale", pp::Replicate{}}}});
      tp::Tensor x = tp::randn({batch, kDim}), y = tp::randn({batch, kDim});
      tp::Tensor scale = tp::randn({1, kDim}), target = tp::randn({batch, kDim});
      std::vector<tp::Tensor> losses;
      pp::StepOutput out =
          schedule.step({x}, {{"y", y}, {"scale", scale}}, {.target = target, .losses = &losses});

      tp::Tensor o = twin->forward_args({x}, {{"y", y}, {"scale", scale}});
      tp::Tensor loss = tp::nn::mse_loss(o, target);
      loss.backward();
      // The microbatch losses weighted by their rows give the batch's mean loss.
      const std::vector<int64_t> rows = {3, 3, 2, 2};
      double weighted = 0;
      REQUIRE(losses.size() == 4);
      for (int mb = 0; mb < n; ++mb) weighted += losses[mb].item() * rows[mb] / double(batch);
      CHECK(weighted == Approx(loss.item()).epsilon(1e-5));
      REQUIRE(out.outputs.size() == 1);
      CHECK(out.outputs[0].shape() == tp::Shape{batch, kDim});
      CHECK(close(out.outputs[0].to_vector(), o.to_vector()));
      check_grads_match(stages, *twin);
    }
  }
}

TEST_CASE("the target is chunked by its own spec", "[schedule][uneven]") {
  tp::manual_seed(24);
  std::vector<std::shared_ptr<pp::PipelineStage>> stages;
  auto m0 = tp::nn::Sequential(tp::nn::Linear(kDim, kDim)).ptr();
  auto m1 = tp::nn::Sequential(tp::nn::Linear(kDim, kDim)).ptr();
  stages.push_back(std::make_shared<pp::PipelineStage>(
      m0, 0, 2, tp::cpu(), std::vector<tp::Tensor>{tp::zeros({2, kDim})}));
  stages.push_back(std::make_shared<pp::PipelineStage>(
      m1, 1, 2, tp::cpu(), std::vector<tp::Tensor>{tp::zeros({2, kDim})}));
  // The target arrives transposed (features x rows): split along dim 1, compared transposed.
  pp::ScheduleGPipe schedule(stages, 2,
                             [](const tp::Tensor& out, const tp::Tensor& t) {
                               return tp::nn::mse_loss(out, tp::transpose(t, 0, 1));
                             },
                             {.target_chunk_spec = pp::TensorChunkSpec{1}});
  tp::Tensor x = tp::randn({4, kDim}), target = tp::randn({kDim, 4});
  std::vector<tp::Tensor> losses;
  schedule.step({x}, {.target = target, .losses = &losses});
  tp::Tensor out = (*m1)((*m0)(x.slice0(2, 4)));
  CHECK(
      losses.at(1).item() ==
      Approx(tp::nn::mse_loss(out, tp::transpose(target, 0, 1).slice0(2, 4)).item()).epsilon(1e-5));
}

namespace {
/// A last stage with two outputs: its input and the input's row sums.
struct TwoOutputs : tp::nn::Module {
  TwoOutputs() { lin = register_module("lin", tp::nn::Linear(kDim, kDim)); }
  std::vector<tp::Tensor> forward_outputs(const std::vector<tp::Tensor>& args,
                                          const tp::nn::TensorDict&) override {
    tp::Tensor h = lin(args[0]);
    return {h, tp::sum(h)};
  }
  tp::Tensor forward(const tp::Tensor& x) override { return lin(x); }
  tp::nn::Linear lin{nullptr};
};
}  // namespace

TEST_CASE("every output of the last stage is returned, merged by output_merge_spec",
          "[schedule][outputs]") {
  tp::manual_seed(25);
  auto m0 = tp::nn::Sequential(tp::nn::Linear(kDim, kDim)).ptr();
  auto m1 = std::make_shared<TwoOutputs>();
  auto make_stages = [&] {
    return std::vector<std::shared_ptr<pp::PipelineStage>>{
        std::make_shared<pp::PipelineStage>(m0, 0, 2, tp::cpu(),
                                            std::vector<tp::Tensor>{tp::zeros({2, kDim})}),
        std::make_shared<pp::PipelineStage>(m1, 1, 2, tp::cpu(),
                                            std::vector<tp::Tensor>{tp::zeros({2, kDim})})};
  };
  tp::Tensor x = tp::randn({6, kDim});
  std::vector<tp::Tensor> rows, sums;
  for (int mb = 0; mb < 3; ++mb) {
    auto outs = m1->forward_outputs({(*m0)(x.slice0(2 * mb, 2 * mb + 2))}, {});
    rows.push_back(outs[0].detach());
    sums.push_back(outs[1].detach());
  }
  SECTION("by default each output is concatenated (scalars one row each)") {
    pp::ScheduleGPipe schedule(make_stages(), 3);
    pp::StepOutput out = schedule.eval({x}, tp::nn::TensorDict{});
    REQUIRE(out.outputs.size() == 2);
    CHECK(close(out.outputs[0].to_vector(), tp::cat(rows, 0).to_vector()));
    CHECK(out.outputs[1].shape() == tp::Shape{3});
    for (int mb = 0; mb < 3; ++mb)
      CHECK(out.outputs[1].to_vector()[mb] == Approx(sums[mb].item()).epsilon(1e-6));
    // The one-tensor overload keeps returning the first output.
    CHECK(close(schedule.eval({x}).to_vector(), tp::cat(rows, 0).to_vector()));
  }
  SECTION("a reducer and a kept output") {
    pp::ScheduleGPipe schedule(make_stages(), 3, nullptr,
                               {.output_merge_spec = {pp::KeepMicrobatches{}, pp::sum_reducer()}});
    pp::StepOutput out = schedule.eval({x}, tp::nn::TensorDict{});
    REQUIRE(out.outputs.size() == 2);
    CHECK_FALSE(out.outputs[0].defined());
    REQUIRE(out.microbatch_outputs.size() == 3);
    for (int mb = 0; mb < 3; ++mb)
      CHECK(close(out.microbatch_outputs[mb][0].to_vector(), rows[mb].to_vector()));
    CHECK(out.outputs[1].item() ==
          Approx(sums[0].item() + sums[1].item() + sums[2].item()).epsilon(1e-5));
  }
  SECTION("a spec per output is required") {
    pp::ScheduleGPipe schedule(make_stages(), 3, nullptr,
                               {.output_merge_spec = {pp::TensorChunkSpec{0}}});
    CHECK_THROWS_WITH(schedule.eval({x}, tp::nn::TensorDict{}),
                      Catch::Contains("output_merge_spec has 1") && Catch::Contains("2 outputs"));
  }
  SECTION("return_outputs = false returns nothing") {
    pp::ScheduleGPipe schedule(make_stages(), 3);
    pp::StepOutput out = schedule.eval({x}, tp::nn::TensorDict{}, {.return_outputs = false});
    CHECK(out.outputs.empty());
    CHECK(out.microbatch_outputs.empty());
  }
}

TEST_CASE("wrong keyword inputs are clear errors, and the schedule recovers",
          "[schedule][kwargs]") {
  tp::manual_seed(26);
  auto model = std::make_shared<KwargsModel>();
  auto pipe =
      pp::pipeline(model, {tp::zeros({2, kDim})},
                   {{"y", tp::zeros({2, kDim})}, {"scale", tp::zeros({1, kDim})}}, four_stages());
  auto stages = pp::build_stages(pipe, {tp::cpu()});
  pp::ScheduleGPipe schedule(stages, 2, tp::nn::mse_loss,
                             {.kwargs_chunk_spec = {{"scale", pp::Replicate{}}}});
  tp::Tensor x = tp::randn({4, kDim}), y = tp::randn({4, kDim}), scale = tp::randn({1, kDim});
  CHECK_THROWS_WITH(schedule.step({x}, {{"y", y}}, {.target = y}),
                    Catch::Contains("keyword input 'scale'"));
  CHECK_THROWS_WITH(schedule.step({x}, {{"y", y}, {"scale", scale}, {"z", y}}, {.target = y}),
                    Catch::Contains("unexpected keyword input 'z'"));
  // A spec for an input that was not passed.
  pp::ScheduleGPipe other(pp::build_stages(pipe, {tp::cpu()}), 2, tp::nn::mse_loss,
                          {.kwargs_chunk_spec = {{"mask", pp::Replicate{}}}});
  CHECK_THROWS_WITH(other.step({x}, {{"y", y}, {"scale", scale}}, {.target = y}),
                    Catch::Contains("'mask'"));
  std::vector<tp::Tensor> losses;
  schedule.step({x}, {{"y", y}, {"scale", scale}}, {.target = y, .losses = &losses});
  CHECK(losses.size() == 2);
}

TEST_CASE("a multi-output last stage trains with a loss over all its outputs",
          "[schedule][outputs]") {
  tp::manual_seed(27);
  auto m0 = tp::nn::Sequential(tp::nn::Linear(kDim, kDim)).ptr();
  auto m1 = std::make_shared<TwoOutputs>();
  std::vector<std::shared_ptr<pp::PipelineStage>> stages = {
      std::make_shared<pp::PipelineStage>(m0, 0, 2, tp::cpu(),
                                          std::vector<tp::Tensor>{tp::zeros({2, kDim})}),
      std::make_shared<pp::PipelineStage>(m1, 1, 2, tp::cpu(),
                                          std::vector<tp::Tensor>{tp::zeros({2, kDim})})};
  auto loss_of = [](const std::vector<tp::Tensor>& outs, const tp::Tensor& target) {
    return tp::nn::mse_loss(outs.at(0), target) + outs.at(1) * 0.01f;
  };
  tp::Tensor x = tp::randn({4, kDim}), y = tp::randn({4, kDim});
  {
    // The one-output loss function names the fix.
    pp::ScheduleGPipe schedule(stages, 2, tp::nn::mse_loss);
    CHECK_THROWS_WITH(schedule.step({x}, {.target = y}),
                      Catch::Contains("produces 2 outputs") && Catch::Contains("outputs_loss_fn"));
    for (auto& s : stages) s->module().zero_grad();
  }
  pp::ScheduleGPipe schedule(stages, 2, nullptr, {.outputs_loss_fn = loss_of});
  std::vector<tp::Tensor> losses;
  pp::StepOutput out = schedule.step({x}, tp::nn::TensorDict{}, {.target = y, .losses = &losses});
  REQUIRE(out.outputs.size() == 2);
  REQUIRE(losses.size() == 2);
  // Reference: the same modules, each microbatch's loss scaled by 1/2.
  std::vector<std::vector<float>> split_grads;
  for (tp::nn::Module* m :
       {static_cast<tp::nn::Module*>(m0.get()), static_cast<tp::nn::Module*>(m1.get())})
    for (auto& p : m->parameters()) split_grads.push_back(p.grad().to_vector());
  m0->zero_grad();
  m1->zero_grad();
  for (int mb = 0; mb < 2; ++mb) {
    auto outs = m1->forward_outputs({(*m0)(x.slice0(2 * mb, 2 * mb + 2))}, {});
    tp::Tensor loss = loss_of(outs, y.slice0(2 * mb, 2 * mb + 2));
    CHECK(losses[mb].item() == Approx(loss.item()).epsilon(1e-5));
    (loss * 0.5f).backward();
  }
  size_t i = 0;
  for (tp::nn::Module* m :
       {static_cast<tp::nn::Module*>(m0.get()), static_cast<tp::nn::Module*>(m1.get())})
    for (auto& p : m->parameters()) CHECK(close(split_grads.at(i++), p.grad().to_vector()));
}
