// The correctness contract end to end: a model traced and split by pipeline(), built into stages,
// trained by each schedule on the stage actors, gives the losses and gradients of the unsplit
// model with the same microbatch accumulation (tied weights included), step after step.
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tensorplay/nn/gpt.h"
#include "tensorplay/pipelining/build_stage.h"
#include "tensorplay/pipelining/pipe_split.h"
#include "tensorplay/pipelining/pipeline.h"
#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/pipelining/split_policy.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace sc = tensorplay::schedules;

namespace {

constexpr int64_t kVocab = 16, kContext = 8;

tp::nn::GPTConfig tiny_gpt() {
  return {.vocab_size = kVocab, .context_length = kContext, .n_layer = 4, .n_head = 2, .width = 16};
}

tp::Tensor lm_loss(const tp::Tensor& logits, const tp::Tensor& targets) {
  return tp::cross_entropy(logits.reshape({-1, kVocab}), targets.reshape({-1}));
}

bool close(const std::vector<float>& a, const std::vector<float>& b, double rel = 1e-5) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    double tol = rel * std::max(1.0, std::fabs(static_cast<double>(b[i])));
    if (std::fabs(static_cast<double>(a[i]) - b[i]) > tol) return false;
  }
  return true;
}

// Trains `kind` on a 4-stage split of a GPT for 2 steps and compares with the unsplit twin, both
// in `dtype`. Gradients match to `rel` of their size (at least 1): float32 rounding, or for
// bfloat16 a fraction of its rounding step (2^-8), since tied gradients are summed in another
// order.
void check_gpt_schedule(sc::ScheduleKind kind, pp::PipelineOptions split,
                        tp::DType dtype = tp::DType::Float32, double rel = 1e-5) {
  tp::manual_seed(7);
  tp::nn::GPT model(tiny_gpt()), twin(tiny_gpt());
  twin->load_state_dict(model->state_dict());
  model->to(dtype);
  twin->to(dtype);
  const int n = 4;
  const int64_t batch = 8;
  tp::Tensor example = tp::zeros({batch / n, kContext});
  auto pipe = pp::pipeline(model, {example}, split);
  REQUIRE(pipe.num_stages() == 4);
  auto stages = pp::build_stages(pipe, {tp::cpu()});
  pp::PipelineSchedule schedule(stages, n, lm_loss, kind);
  tp::optim::SGD opt(pp::parameters(stages), {.lr = 0.1f});
  tp::optim::SGD twin_opt(twin->parameters(), {.lr = 0.1f});

  tp::Generator data(5);
  for (int step = 0; step < 2; ++step) {
    tp::Tensor idx = tp::randint(0, kVocab, {batch, kContext}, {}, &data);
    tp::Tensor targets = tp::randint(0, kVocab, {batch, kContext}, {}, &data);
    std::vector<tp::Tensor> losses;
    schedule.step({idx}, {.target = targets, .losses = &losses});

    for (int mb = 0; mb < n; ++mb) {
      int64_t rows = batch / n;
      tp::Tensor loss = lm_loss(twin(idx.slice0(mb * rows, (mb + 1) * rows)),
                                targets.slice0(mb * rows, (mb + 1) * rows));
      INFO("step " << step << " microbatch " << mb);
      CHECK(losses.at(mb).dtype() == dtype);
      CHECK(losses.at(mb).item() == Approx(loss.item()).epsilon(rel));
      (loss * (1.0f / n)).backward();
    }
    for (const auto& s : stages) {
      for (const auto& [name, p] : s->module().named_parameters()) {
        INFO("step " << step << " stage " << s->stage_index() << " parameter " << name);
        tp::Tensor want = twin->find_tensor(name).grad();
        REQUIRE(p.grad().defined());
        CHECK(p.grad().dtype() == dtype);
        CHECK(close(p.grad().to_vector(), want.to_vector(), rel));
      }
    }
    opt.step();
    opt.zero_grad();
    twin_opt.step();
    twin_opt.zero_grad();
  }
}

pp::PipelineOptions at_blocks() {
  return {.split_spec = {{"blocks.1", pp::SplitPoint::Beginning},
                         {"blocks.2", pp::SplitPoint::Beginning},
                         {"blocks.3", pp::SplitPoint::Beginning}}};
}

}  // namespace

TEST_CASE("every schedule trains a split GPT like the unsplit model", "[pipeline][gpt]") {
  for (auto kind : sc::all_schedule_kinds()) {
    DYNAMIC_SECTION(sc::schedule_name(kind)) { check_gpt_schedule(kind, at_blocks()); }
  }
}

TEST_CASE("a bfloat16 GPT trains split as unsplit", "[pipeline][gpt]") {
  for (auto kind : {sc::ScheduleKind::OneFOneB, sc::ScheduleKind::ZBVZeroBubble}) {
    DYNAMIC_SECTION(sc::schedule_name(kind)) {
      check_gpt_schedule(kind, at_blocks(), tp::DType::BFloat16, 2e-3);
    }
  }
}

TEST_CASE("a GPT split by a cost policy trains like the unsplit model", "[pipeline][gpt]") {
  check_gpt_schedule(sc::ScheduleKind::OneFOneB, {.split_policy = pp::split_by_cost(4)});
  check_gpt_schedule(sc::ScheduleKind::ZBVZeroBubble,
                     {.split_policy = pp::split_by_parameter_count(4)});
}

namespace {
// A model cut by pipe_split() calls, with a skip connection across two stages.
struct SkipNetImpl : tp::nn::Module {
  SkipNetImpl() {
    a = register_module("a", tp::nn::Linear(8, 8));
    b = register_module("b", tp::nn::Linear(8, 8));
    c = register_module("c", tp::nn::Linear(8, 8));
    d = register_module("d", tp::nn::Linear(8, 8));
  }
  tp::Tensor forward(const tp::Tensor& x) override {
    tp::Tensor h = tp::relu(a(x));
    pp::pipe_split();
    tp::Tensor g = tp::relu(b(h));
    pp::pipe_split();
    tp::Tensor k = tp::tanh(c(g));
    pp::pipe_split();
    return d(k + h);  // h was made in stage 0 and is read in stage 3
  }
  tp::nn::Linear a{nullptr}, b{nullptr}, c{nullptr}, d{nullptr};
};
TENSORPLAY_MODULE(SkipNet);
}  // namespace

TEST_CASE("a pipe_split model with a skip connection trains like the unsplit model", "[pipeline]") {
  for (auto kind : {sc::ScheduleKind::GPipe, sc::ScheduleKind::InterleavedZeroBubble,
                    sc::ScheduleKind::DualPipeV}) {
    DYNAMIC_SECTION(sc::schedule_name(kind)) {
      tp::manual_seed(3);
      SkipNet model, twin;
      twin->load_state_dict(model->state_dict());
      auto pipe = pp::pipeline(model, {tp::zeros({2, 8})});
      REQUIRE(pipe.num_stages() == 4);
      auto stages = pp::build_stages(pipe, {tp::cpu()});
      pp::PipelineSchedule schedule(stages, 4, tp::nn::mse_loss, kind);
      tp::Tensor x = tp::randn({8, 8}), y = tp::randn({8, 8});
      schedule.step({x}, {.target = y});
      for (int mb = 0; mb < 4; ++mb)
        (tp::nn::mse_loss(twin(x.slice0(2 * mb, 2 * mb + 2)), y.slice0(2 * mb, 2 * mb + 2)) * 0.25f)
            .backward();
      for (const auto& s : stages)
        for (const auto& [name, p] : s->module().named_parameters()) {
          INFO(name);
          CHECK(close(p.grad().to_vector(), twin->find_tensor(name).grad().to_vector()));
        }
    }
  }
}

namespace {

// A block with dropout that may add a skip input: dropout(gelu(fc(x))) (+ skip).
struct SkipBlockImpl : tp::nn::Module {
  SkipBlockImpl() {
    fc = register_module("fc", tp::nn::Linear(8, 8));
    drop = register_module("drop", tp::nn::Dropout(0.25f));
  }
  tp::Tensor forward_args(const std::vector<tp::Tensor>& args, const tp::nn::TensorDict&) override {
    tp::Tensor y = drop(tp::gelu(fc(args[0])));
    return args.size() > 1 ? y + args[1] : y;
  }
  std::string type_name() const override { return "SkipBlock"; }
  tp::nn::Linear fc{nullptr};
  tp::nn::Dropout drop{nullptr};
};
TENSORPLAY_MODULE(SkipBlock);

// Four SkipBlocks; block 0's output skips over stages 1 and 2 into block 3, which reads it inside
// its recomputed ops.
struct SkipStackImpl : tp::nn::Module {
  SkipStackImpl() {
    blocks = register_module("blocks", tp::nn::ModuleList());
    for (int i = 0; i < 4; ++i) blocks->push_back(SkipBlock());
  }
  tp::Tensor forward(const tp::Tensor& x) override {
    auto call = [this](size_t i, std::vector<tp::Tensor> args) { return (*(*blocks)[i])(args); };
    tp::Tensor h = call(0, {x});
    tp::Tensor k = call(2, {call(1, {h})});
    return call(3, {k, h});
  }
  tp::nn::ModuleList blocks{nullptr};
};
TENSORPLAY_MODULE(SkipStack);

// One job trained for two steps under `kind`, with `policy` on every stage: its losses, then every
// gradient of both steps. Each Dropout draws from its own generator, so the masks do not depend
// on which thread runs first.
struct RecomputeJob {
  std::shared_ptr<tp::nn::Module> model;
  std::vector<std::unique_ptr<tp::Generator>> generators;

  std::vector<std::vector<float>> train(sc::ScheduleKind kind, tp::DType dtype,
                                        const std::string& policy, bool gpt) {
    tp::manual_seed(17);
    if (gpt) {
      auto config = tiny_gpt();
      config.dropout = 0.2f;
      model = tp::nn::GPT(config).ptr();
    } else {
      model = SkipStack().ptr();
    }
    model->to(dtype);
    for (auto& [path, m] : model->named_modules())
      if (auto* d = dynamic_cast<tp::nn::DropoutImpl*>(m.get())) {
        generators.push_back(std::make_unique<tp::Generator>(500 + generators.size()));
        d->set_generator(generators.back().get());
      }
    const int n = 4;
    const int64_t batch = 8;
    tp::Tensor example =
        gpt ? tp::zeros({batch / n, kContext}) : tp::zeros({batch / n, 8}).to(dtype);
    auto pipe = pp::pipeline(model, {example}, at_blocks());
    auto stages = pp::build_stages(pipe, {tp::cpu()});
    for (auto& s : stages) s->set_recompute(pp::RecomputePolicy::parse(policy));
    pp::LossFn loss_fn = gpt ? pp::LossFn(lm_loss) : pp::LossFn(tp::nn::mse_loss);
    pp::PipelineSchedule schedule(stages, n, loss_fn, kind);
    tp::optim::SGD opt(pp::parameters(stages), {.lr = 0.1f});
    tp::Generator data(5);
    std::vector<std::vector<float>> out;
    for (int step = 0; step < 2; ++step) {
      tp::Tensor x = gpt ? tp::randint(0, kVocab, {batch, kContext}, {}, &data)
                         : tp::randn({batch, 8}, {}, &data).to(dtype);
      tp::Tensor y = gpt ? tp::randint(0, kVocab, {batch, kContext}, {}, &data)
                         : tp::randn({batch, 8}, {}, &data).to(dtype);
      std::vector<tp::Tensor> losses;
      schedule.step({x}, {.target = y, .losses = &losses});
      for (const auto& l : losses) out.push_back(l.to_vector());
      for (const auto& s : stages)
        for (const auto& [name, p] : s->module().named_parameters())
          out.push_back(p.grad().to_vector());
      opt.step();
      opt.zero_grad();
    }
    return out;
  }
};

}  // namespace

TEST_CASE("recomputation keeps every loss and gradient bit for bit under each schedule",
          "[pipeline][recompute]") {
  for (bool gpt : {true, false}) {
    for (auto dtype : {tp::DType::Float32, tp::DType::BFloat16}) {
      for (auto kind : sc::all_schedule_kinds()) {
        const std::string policy = gpt ? "full" : "every:2";
        DYNAMIC_SECTION((gpt ? "GPT with dropout, " : "skip across stages, ")
                        << tp::to_string(dtype) << ", " << sc::schedule_name(kind) << ", "
                        << policy) {
          RecomputeJob plain, recomputed;
          auto want = plain.train(kind, dtype, "none", gpt);
          auto got = recomputed.train(kind, dtype, policy, gpt);
          REQUIRE(got.size() == want.size());
          for (size_t i = 0; i < got.size(); ++i) {
            INFO("loss or gradient " << i);
            CHECK(got[i] == want[i]);
          }
        }
      }
    }
  }
}

TEST_CASE("set_recompute on a stage in the middle of a step is refused", "[pipeline][recompute]") {
  RecomputeJob job;
  tp::manual_seed(1);
  auto pipe = pp::pipeline(SkipStack(), {tp::zeros({2, 8})}, at_blocks());
  auto stages = pp::build_stages(pipe, {tp::cpu()});
  stages[1]->forward(0, {tp::zeros({2, 8})});
  CHECK_THROWS_WITH(stages[1]->set_recompute(pp::RecomputePolicy::full()),
                    Catch::Contains("stage 1") && Catch::Contains("between forward and backward"));
  stages[1]->clear();
  stages[1]->set_recompute(pp::RecomputePolicy::full());
  CHECK(stages[1]->recomputed_modules() == std::vector<std::string>{"blocks.1"});
}
