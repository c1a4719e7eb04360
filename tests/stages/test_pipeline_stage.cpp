// Tests for pipeline_stage.h: per-microbatch forward/backward against the unsplit module.
#include <catch2/catch.hpp>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "tensorplay/base/knobs.h"
#include "tensorplay/core/core_knobs.h"
#include "tensorplay/core/cpu_threads.h"
#include "tensorplay/pipelining/build_stage.h"
#include "tensorplay/pipelining/pipeline.h"
#include "tensorplay/pipelining/pipeline_stage.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;

namespace {
std::shared_ptr<tp::nn::Module> block(int64_t dim) {
  return tp::nn::Sequential(tp::nn::Linear(dim, dim), tp::nn::ReLU()).ptr();
}
}  // namespace

TEST_CASE("two manual stages reproduce the unsplit gradients", "[stage]") {
  tp::manual_seed(1);
  auto m0 = block(8), m1 = block(8);
  pp::PipelineStage s0(m0, 0, 2, tp::cpu(), {tp::zeros({4, 8})});
  pp::PipelineStage s1(m1, 1, 2, tp::cpu(), {tp::zeros({4, 8})});
  CHECK(s1.output_meta()[0].shape == tp::Shape{4, 8});
  tp::Tensor x = tp::randn({4, 8}), y = tp::randn({4, 8});

  auto h = s0.forward(0, {x});
  auto out = s1.forward(0, h);
  tp::Tensor loss = s1.compute_loss(0, y, tp::nn::mse_loss);
  auto g1 = s1.backward(0, {}, 1.0f);
  REQUIRE(g1.size() == 1);
  auto g0 = s0.backward(0, g1);
  CHECK(g0.empty());
  CHECK(s0.stashed_microbatches() == 0);

  // Reference: the same modules chained, one backward.
  std::vector<tp::Tensor> split_grads;
  for (auto& p : m0->parameters()) split_grads.push_back(p.grad());
  for (auto& p : m1->parameters()) split_grads.push_back(p.grad());
  m0->zero_grad();
  m1->zero_grad();
  tp::Tensor ref_loss = tp::nn::mse_loss((*m1)((*m0)(x)), y);
  ref_loss.backward();
  CHECK(ref_loss.item() == loss.item());
  size_t i = 0;
  for (auto* m : {m0.get(), m1.get()})
    for (auto& p : m->parameters()) CHECK(p.grad().to_vector() == split_grads[i++].to_vector());
}

TEST_CASE("split backward on a stage equals its full backward", "[stage]") {
  tp::manual_seed(2);
  auto a = block(6), b = block(6);
  b->find_tensor("0.weight").copy_(a->find_tensor("0.weight"));
  b->find_tensor("0.bias").copy_(a->find_tensor("0.bias"));
  pp::PipelineStage full(a, 1, 3, tp::cpu(), {tp::zeros({3, 6})});
  pp::PipelineStage split(b, 1, 3, tp::cpu(), {tp::zeros({3, 6})});
  tp::Tensor x = tp::randn({3, 6}), g = tp::randn({3, 6});
  full.forward(0, {x});
  split.forward(0, {x});
  auto gf = full.backward(0, {g});
  auto gs = split.backward_input(0, {g});
  CHECK_FALSE(b->find_tensor("0.weight").grad().defined());
  split.backward_weight(0);
  CHECK(gf[0].to_vector() == gs[0].to_vector());
  CHECK(a->find_tensor("0.weight").grad().to_vector() ==
        b->find_tensor("0.weight").grad().to_vector());
}

TEST_CASE("a later stage sends back the gradient of a bfloat16 activation", "[stage]") {
  tp::manual_seed(3);
  auto m = block(4);
  m->to(tp::DType::BFloat16);
  tp::Tensor x = tp::randn({2, 4}).to(tp::DType::BFloat16);
  pp::PipelineStage s(m, 1, 3, tp::cpu(), {x});
  CHECK(s.input_meta()[0].dtype == tp::DType::BFloat16);
  s.forward(0, {x});
  auto g = s.backward(0, {tp::ones({2, 4}).to(tp::DType::BFloat16)});
  REQUIRE(g.size() == 1);
  REQUIRE(g[0].defined());
  CHECK(g[0].dtype() == tp::DType::BFloat16);
  CHECK(m->find_tensor("0.weight").grad().dtype() == tp::DType::BFloat16);
  CHECK_THROWS_WITH(s.forward(1, {x.to(tp::DType::Float32)}), Catch::Contains("bfloat16"));
}

TEST_CASE("a microbatch of the wrong shape gets a typed error naming the stage", "[stage]") {
  pp::PipelineStage s(block(8), 0, 2, tp::cpu(), {tp::zeros({4, 8})});
  CHECK_THROWS_AS(s.forward(0, {tp::zeros({4, 7})}), pp::StageInputError);
  CHECK_THROWS_WITH(s.forward(0, {tp::zeros({4, 7})}),
                    Catch::Contains("stage 0") && Catch::Contains("input 0") &&
                        Catch::Contains("[4, 8]") && Catch::Contains("[4, 7]"));
  CHECK_THROWS_WITH(s.forward(0, {tp::zeros({4, 8}), tp::zeros({4, 8})}),
                    Catch::Contains("expected 1 inputs"));
}

TEST_CASE("backward before forward is an error", "[stage]") {
  pp::PipelineStage s(block(4), 1, 2, tp::cpu(), {tp::zeros({2, 4})});
  CHECK_THROWS_WITH(s.backward(3, {}), Catch::Contains("before its forward"));
}

TEST_CASE("a stage's thread count applies on the thread that runs its work", "[stage]") {
  auto m0 = block(8);
  pp::PipelineStage s0(m0, 0, 1, tp::cpu(), {tp::zeros({4, 8})});
  CHECK(s0.num_threads() == 0);
  CHECK_THROWS_WITH(s0.set_num_threads(-1), Catch::Contains("set_num_threads needs n >= 1"));
  s0.set_num_threads(1);
  int seen = 0;
  std::thread([&] {
    tp::set_num_threads(2);
    s0.forward(0, {tp::ones({4, 8})});
    seen = tp::get_num_threads();
  }).join();
  CHECK(seen == 1);
}

TEST_CASE("a stage with no thread setting computes on its share of the cores", "[stage]") {
  if (tp::knob_is_set(tp::kNumThreadsKnob)) {
    WARN("TENSORPLAY_NUM_THREADS is set, and it wins over the share: nothing to check");
    return;
  }
  tp::reset_default_num_threads();  // another test of this process may have set one
  auto m0 = block(8);
  pp::PipelineStage s0(m0, 0, 1, tp::cpu(), {tp::zeros({4, 8})});
  CHECK_THROWS_WITH(s0.set_concurrent_threads(0), Catch::Contains("needs n >= 1, got 0"));
  s0.set_concurrent_threads(64);  // more actors than any test machine has cores
  int seen = 0, explicit_seen = 0;
  std::thread([&] {
    s0.forward(0, {tp::ones({4, 8})});
    seen = tp::get_num_threads();
  }).join();
  CHECK(seen == tp::thread_share(static_cast<int>(std::thread::hardware_concurrency()), 1, 64));
  s0.set_num_threads(3);  // an explicit setting wins
  std::thread([&] {
    s0.forward(1, {tp::ones({4, 8})});
    explicit_seen = tp::get_num_threads();
  }).join();
  CHECK(explicit_seen == 3);
}

TEST_CASE("dw_builder builds at I and runs at W, after the weight gradients", "[stage][dw]") {
  tp::manual_seed(3);
  auto m = block(4);
  std::vector<std::string> events;
  tp::Tensor weight = m->find_tensor("0.weight");
  int built = 0;
  pp::PipelineStage stage(m, 1, 3, tp::cpu(), {tp::zeros({2, 4})}, [&] {
    int id = built++;
    events.push_back("build " + std::to_string(id));
    return [&, id] {
      // The runner sees this microbatch's weight gradients already accumulated.
      events.push_back("run " + std::to_string(id) +
                       (weight.grad().defined() ? " with grad" : " without grad"));
    };
  });
  tp::Tensor x = tp::randn({2, 4}), g = tp::randn({2, 4});
  stage.forward(0, {x});
  stage.forward(1, {x});
  stage.backward_input(0, {g});
  stage.backward_input(1, {g});
  CHECK(events == std::vector<std::string>{"build 0", "build 1"});
  stage.backward_weight(1);
  stage.backward_weight(0);
  CHECK(events ==
        std::vector<std::string>{"build 0", "build 1", "run 1 with grad", "run 0 with grad"});

  // A full backward builds and runs at once.
  events.clear();
  stage.forward(2, {x});
  stage.backward(2, {g});
  CHECK(events == std::vector<std::string>{"build 2", "run 2 with grad"});

  // A stage cleared after an error drops its unrun runners.
  events.clear();
  stage.forward(3, {x});
  stage.backward_input(3, {g});
  stage.clear();
  CHECK(events == std::vector<std::string>{"build 3"});
}

namespace {

// A GPT with dropout, each Dropout drawing from its own generator, cut into 2 stages at blocks.2.
struct DropoutGpt {
  tp::nn::GPT model{nullptr};
  std::vector<std::unique_ptr<tp::Generator>> generators;
  std::vector<std::shared_ptr<pp::PipelineStage>> stages;

  explicit DropoutGpt(tp::DType dtype) {
    tp::manual_seed(21);
    model = tp::nn::GPT(tp::nn::GPTConfig{.vocab_size = 11,
                                          .context_length = 6,
                                          .n_layer = 4,
                                          .n_head = 2,
                                          .width = 16,
                                          .dropout = 0.2f});
    model->to(dtype);
    for (auto& [path, m] : model->named_modules())
      if (auto* d = dynamic_cast<tp::nn::DropoutImpl*>(m.get())) {
        generators.push_back(std::make_unique<tp::Generator>(300 + generators.size()));
        d->set_generator(generators.back().get());
      }
    auto pipe = pp::pipeline(model, {tp::zeros({2, 6})},
                             {.split_spec = {{"blocks.2", pp::SplitPoint::Beginning}}});
    stages = pp::build_stages(pipe, {tp::cpu()});
  }

  // Two microbatches: both forwards, then each backward, as B or as I then W (W after both I);
  // with `ahead`, each stage first rebuilds the microbatch's activations (recompute_ahead).
  // Returns the losses, then every parameter gradient, as float vectors.
  std::vector<std::vector<float>> step(bool split_backward, bool ahead = false) {
    tp::Generator data(4);
    auto loss_fn = [](const tp::Tensor& logits, const tp::Tensor& y) {
      return tp::cross_entropy(logits.reshape({-1, 11}), y.reshape({-1}));
    };
    std::vector<std::vector<float>> out;
    for (int mb = 0; mb < 2; ++mb) {
      tp::Tensor x = tp::randint(0, 11, {2, 6}, {}, &data);
      tp::Tensor y = tp::randint(0, 11, {2, 6}, {}, &data);
      auto h = stages[0]->forward(mb, {x});
      stages[1]->forward(mb, h);
      out.push_back(stages[1]->compute_loss(mb, y, loss_fn).to_vector());
    }
    for (int mb = 0; mb < 2; ++mb) {
      if (ahead) {
        for (auto& stage : stages) {
          REQUIRE(stage->can_recompute_ahead(mb));
          const int64_t before = stage->memory_account()->current();
          {
            tp::MemoryScope scope(stage->memory_account());
            stage->recompute_ahead(mb);
          }
          CHECK(stage->memory_account()->current() > before);  // the activations are back
          CHECK_FALSE(stage->can_recompute_ahead(mb));         // once per microbatch
        }
      }
      if (split_backward) {
        auto g = stages[1]->backward_input(mb, {}, 0.5f);
        stages[0]->backward_input(mb, g);
      } else {
        stages[0]->backward(mb, stages[1]->backward(mb, {}, 0.5f));
      }
    }
    if (split_backward)
      for (int mb = 0; mb < 2; ++mb)
        for (auto& s : stages) s->backward_weight(mb);
    for (auto& s : stages)
      for (auto& [name, p] : s->module().named_parameters()) out.push_back(p.grad().to_vector());
    return out;
  }
};

}  // namespace

TEST_CASE("a traced stage recomputes its blocks and keeps every gradient", "[stage][recompute]") {
  for (auto dtype : {tp::DType::Float32, tp::DType::BFloat16}) {
    for (bool split : {false, true}) {
      for (const char* policy : {"full", "every:2", "type:MLP"}) {
        DYNAMIC_SECTION(tp::to_string(dtype) << (split ? " I/W " : " B ") << policy) {
          DropoutGpt plain(dtype), recomputed(dtype);
          for (auto& s : recomputed.stages) s->set_recompute(pp::RecomputePolicy::parse(policy));
          CHECK(recomputed.stages[0]->recompute().to_string() == policy);
          if (std::string(policy) == "full") {
            CHECK(recomputed.stages[0]->recomputed_modules() ==
                  std::vector<std::string>{"blocks.0", "blocks.1"});
            CHECK(recomputed.stages[1]->recomputed_modules() ==
                  std::vector<std::string>{"blocks.2", "blocks.3"});
          }
          for (int step = 0; step < 2; ++step) {  // the generators move on alike
            INFO("step " << step);
            CHECK(recomputed.step(split) == plain.step(split));
            for (auto* g : {&plain, &recomputed})
              for (auto& s : g->stages) s->module().zero_grad();
          }
        }
      }
    }
  }
}

TEST_CASE("a stage that rebuilds a microbatch's activations ahead keeps every gradient",
          "[stage][recompute]") {
  for (bool split : {false, true}) {
    DYNAMIC_SECTION((split ? "I/W" : "B")) {
      DropoutGpt plain(tp::DType::Float32), recomputed(tp::DType::Float32);
      CHECK_FALSE(plain.stages[0]->can_recompute_ahead(0));  // no stash, no recomputation
      for (auto& s : recomputed.stages) s->set_recompute(pp::RecomputePolicy::full());
      CHECK_FALSE(recomputed.stages[0]->can_recompute_ahead(0));  // no forward yet
      for (int step = 0; step < 2; ++step) {
        INFO("step " << step);
        CHECK(recomputed.step(split, true) == plain.step(split));
        for (auto* g : {&plain, &recomputed})
          for (auto& s : g->stages) s->module().zero_grad();
      }
    }
  }
}

TEST_CASE("a stage of a user module checkpoints its chosen submodules", "[stage][recompute]") {
  tp::manual_seed(5);
  auto make = [] {
    auto seq = tp::nn::Sequential(block(8), block(8), block(8)).ptr();
    return seq;
  };
  auto a = make(), b = make();
  b->load_state_dict(a->state_dict());
  pp::PipelineStage plain(a, 1, 3, tp::cpu(), {tp::zeros({4, 8})});
  pp::PipelineStage recomputed(b, 1, 3, tp::cpu(), {tp::zeros({4, 8})});
  recomputed.set_recompute(pp::RecomputePolicy::every_kth(2));
  CHECK(recomputed.recomputed_modules() == std::vector<std::string>{"1"});
  CHECK(b->find_module("1")->is_checkpointed());
  CHECK_FALSE(b->find_module("0")->is_checkpointed());
  tp::Tensor x = tp::randn({4, 8}), g = tp::randn({4, 8});
  plain.forward(0, {x});
  recomputed.forward(0, {x});
  CHECK(recomputed.backward(0, {g})[0].to_vector() == plain.backward(0, {g})[0].to_vector());
  auto pa = a->named_parameters(), pb = b->named_parameters();
  for (size_t i = 0; i < pa.size(); ++i)
    CHECK(pb[i].second.grad().to_vector() == pa[i].second.grad().to_vector());
  recomputed.set_recompute(pp::RecomputePolicy::none());
  CHECK_FALSE(b->find_module("1")->is_checkpointed());
}

namespace {

/// Stage 1 of 3 twice over one module of two blocks (the same weights): plain, and recomputing
/// under `policy` (full: two segments; every:2: one).
struct PlainAndRecomputed {
  std::shared_ptr<tp::nn::Module> a = tp::nn::Sequential(block(8), block(8)).ptr();
  std::shared_ptr<tp::nn::Module> b = copy_of(a);
  pp::PipelineStage plain{a, 1, 3, tp::cpu(), {tp::zeros({4, 8})}};
  pp::PipelineStage recomputed{b, 1, 3, tp::cpu(), {tp::zeros({4, 8})}};
  explicit PlainAndRecomputed(pp::RecomputePolicy policy = pp::RecomputePolicy::full()) {
    recomputed.set_recompute(policy);
  }

  static std::shared_ptr<tp::nn::Module> copy_of(const std::shared_ptr<tp::nn::Module>& m) {
    auto out = tp::nn::Sequential(block(8), block(8)).ptr();
    out->load_state_dict(m->state_dict());
    return out;
  }
  void check_same_grads() const {
    auto pa = a->named_parameters(), pb = b->named_parameters();
    for (size_t i = 0; i < pa.size(); ++i)
      CHECK(pb[i].second.grad().to_vector() == pa[i].second.grad().to_vector());
  }
};

}  // namespace

TEST_CASE("a recomputing stage adds its weight gradients at I, the same bits as at W",
          "[stage][recompute]") {
  tp::manual_seed(6);
  PlainAndRecomputed s;
  std::vector<tp::Tensor> x, g;
  for (int mb = 0; mb < 3; ++mb) {
    x.push_back(tp::randn({4, 8}));
    g.push_back(tp::randn({4, 8}));
    s.plain.forward(mb, {x[mb]});
    s.recomputed.forward(mb, {x[mb]});
  }
  tp::Tensor weight = s.b->find_tensor("1.0.weight");
  for (int mb = 0; mb < 3; ++mb) {
    CHECK(s.recomputed.backward_input(mb, {g[mb]})[0].to_vector() ==
          s.plain.backward_input(mb, {g[mb]})[0].to_vector());
    // Nothing waits in the stash for W: the gradient is in .grad already.
    REQUIRE(weight.grad().defined());
  }
  CHECK_FALSE(s.a->find_tensor("1.0.weight").grad().defined());
  for (int mb = 0; mb < 3; ++mb) {
    s.plain.backward_weight(mb);
    s.recomputed.backward_weight(mb);  // still required by the order, and still checked
  }
  CHECK(s.recomputed.stashed_microbatches() == 0);
  s.check_same_grads();
  CHECK_THROWS_WITH(s.recomputed.backward_weight(0),
                    Catch::Contains("backward_weight of microbatch 0"));
}

TEST_CASE("a recomputing stage's forward may keep its activations for a backward next",
          "[stage][recompute]") {
  tp::manual_seed(7);
  PlainAndRecomputed s(pp::RecomputePolicy::every_kth(2));  // one segment
  pp::PipelineStage& kept = s.recomputed;
  tp::Tensor x = tp::randn({4, 8}), g = tp::randn({4, 8});
  s.plain.forward(0, {x});
  const size_t before = tp::host_memory_stats().allocated_bytes;
  kept.forward(0, {x}, {}, /*keep_activations=*/true);
  const size_t held = tp::host_memory_stats().allocated_bytes - before;
  CHECK_FALSE(kept.can_recompute_ahead(0));  // nothing to rebuild
  kept.forward(1, {x});                      // the next forward recomputes again
  CHECK(kept.can_recompute_ahead(1));
  CHECK(held > 0);
  CHECK(kept.backward_input(0, {g})[0].to_vector() ==
        s.plain.backward_input(0, {g})[0].to_vector());
  s.plain.backward_weight(0);
  kept.backward_weight(0);
  s.check_same_grads();
}

TEST_CASE("a stage of several recomputed segments rebuilds them even for a backward next",
          "[stage][recompute]") {
  // Its backward rebuilds one segment at a time, which holds less than keeping every segment.
  tp::manual_seed(7);
  PlainAndRecomputed s;  // full: two segments
  tp::Tensor x = tp::randn({4, 8}), g = tp::randn({4, 8});
  s.plain.forward(0, {x});
  s.recomputed.forward(0, {x}, {}, /*keep_activations=*/true);
  CHECK(s.recomputed.can_recompute_ahead(0));  // nothing kept: there is something to rebuild
  CHECK(s.recomputed.backward_input(0, {g})[0].to_vector() ==
        s.plain.backward_input(0, {g})[0].to_vector());
  s.plain.backward_weight(0);
  s.recomputed.backward_weight(0);
  s.check_same_grads();
}

TEST_CASE("a recomputing stage holds fewer bytes per microbatch", "[stage][recompute]") {
  tp::manual_seed(8);
  tp::nn::GPT model(tp::nn::GPTConfig{
      .vocab_size = 16, .context_length = 64, .n_layer = 4, .n_head = 2, .width = 32});
  auto pipe = pp::pipeline(model, {tp::zeros({4, 64})},
                           {.split_spec = {{"blocks.2", pp::SplitPoint::Beginning}}});
  auto stages = pp::build_stages(pipe, {tp::cpu()});
  pp::PipelineStage& stage = *stages[1];
  tp::Tensor h = tp::randn({4, 64, 32});
  auto held = [&] {
    const size_t before = tp::host_memory_stats().allocated_bytes;
    auto out = stage.forward(0, {h});
    const size_t after = tp::host_memory_stats().allocated_bytes;
    stage.clear();
    return after - before;
  };
  const size_t plain = held();
  stage.set_recompute(pp::RecomputePolicy::full());
  const size_t full = held();
  INFO("plain " << plain << " bytes, full recomputation " << full << " bytes");
  // The last stage keeps its two blocks' inputs, ln_f's and the head's activations.
  CHECK(full * 3 < plain);
}

TEST_CASE("a recomputing stage lets go of its output once sent, and of the last one after the loss",
          "[stage][recompute]") {
  tp::manual_seed(8);
  tp::nn::GPT model(tp::nn::GPTConfig{
      .vocab_size = 16, .context_length = 64, .n_layer = 3, .n_head = 2, .width = 32});
  auto pipe = pp::pipeline(model, {tp::zeros({4, 64})},
                           {.split_spec = {{"blocks.1", pp::SplitPoint::Beginning},
                                           {"blocks.2", pp::SplitPoint::Beginning}}});
  auto stages = pp::build_stages(pipe, {tp::cpu()});
  const size_t hidden = 4 * 64 * 32 * 4;  // one [4, 64, 32] float32 stage input or output
  tp::Tensor h = tp::randn({4, 64, 32});
  tp::Tensor target = tp::randint(0, 16, {4, 64});
  auto loss_fn = [](const tp::Tensor& logits, const tp::Tensor& t) {
    return tp::cross_entropy(logits.reshape({-1, 16}), t.reshape({-1}));
  };
  // Bytes a stage holds after F of microbatch 0 (and its loss, on the last stage), its sent
  // output dropped as the next stage would after its own backward.
  auto held = [&](pp::PipelineStage& stage) {
    const size_t before = tp::host_memory_stats().allocated_bytes;
    {
      auto out = stage.forward(0, {h});
      if (stage.is_last()) stage.compute_loss(0, target, pp::LossFn(loss_fn));
    }
    const size_t after = tp::host_memory_stats().allocated_bytes;
    stage.clear();
    return after - before;
  };
  pp::PipelineStage& middle = *stages[1];
  pp::PipelineStage& last = *stages[2];
  const size_t middle_plain = held(middle), last_plain = held(last);
  middle.set_recompute(pp::RecomputePolicy::full());
  last.set_recompute(pp::RecomputePolicy::full());
  const size_t middle_full = held(middle), last_full = held(last);
  INFO("middle: plain " << middle_plain << ", full " << middle_full << "; last: plain "
                        << last_plain << ", full " << last_full << "; a stage input " << hidden);
  // The middle stage's block input is the caller's h: the stage holds nothing else (before, its
  // output too).
  CHECK(middle_full < hidden / 8);
  // The last stage: its block's output (ln_f's input), ln_f's output (the head's input) and what
  // the loss saved of the [4, 64, 16] logits; not the logits as its output besides.
  CHECK(last_full < 2 * hidden + hidden / 2 + hidden / 8);
  CHECK(middle_full * 10 < middle_plain);
}

TEST_CASE("a stage keeps of its output only the history: dropping the sent output frees it",
          "[stage]") {
  tp::manual_seed(8);
  tp::nn::GPT model(tp::nn::GPTConfig{
      .vocab_size = 16, .context_length = 64, .n_layer = 3, .n_head = 2, .width = 32});
  auto pipe = pp::pipeline(model, {tp::zeros({4, 64})},
                           {.split_spec = {{"blocks.1", pp::SplitPoint::Beginning},
                                           {"blocks.2", pp::SplitPoint::Beginning}}});
  auto stages = pp::build_stages(pipe, {tp::cpu()});
  tp::Tensor h = tp::randn({4, 64, 32});
  tp::Tensor target = tp::randn({4, 64, 16});
  // Bytes freed when the caller (the next stage, or the step) lets go of microbatch 0's output.
  auto freed_with_output = [&](pp::PipelineStage& stage) {
    auto out = stage.forward(0, {h});
    if (stage.is_last()) stage.compute_loss(0, target, pp::LossFn(tp::nn::mse_loss));
    const size_t with_output = tp::host_memory_stats().allocated_bytes;
    out.clear();
    const size_t freed = with_output - tp::host_memory_stats().allocated_bytes;
    stage.clear();
    return freed;
  };
  // The middle stage's output, a [4, 64, 32] float32 residual sum no backward reads.
  CHECK(freed_with_output(*stages[1]) == 4 * 64 * 32 * 4);
  // The last stage's logits, [4, 64, 16]: the loss (MSE) keeps what it needs of them apart.
  CHECK(freed_with_output(*stages[2]) == 4 * 64 * 16 * 4);
  // The backward still runs from the history alone.
  auto out = stages[1]->forward(0, {h});
  CHECK(stages[1]->backward(0, {tp::ones(out[0].shape())}).at(0).shape() == h.shape());
}

TEST_CASE("a model with checkpoint-wrapped blocks traces to the same stages",
          "[stage][recompute]") {
  auto make = [] {
    tp::manual_seed(9);
    return tp::nn::GPT(tp::nn::GPTConfig{
        .vocab_size = 10, .context_length = 4, .n_layer = 2, .n_head = 2, .width = 8});
  };
  tp::nn::GPT plain = make(), wrapped = make();
  for (const auto& block : *wrapped->blocks) tp::nn::checkpoint_wrapper(block);
  pp::PipelineOptions split{.split_spec = {{"blocks.1", pp::SplitPoint::Beginning}}};
  auto a = pp::pipeline(plain, {tp::zeros({2, 4})}, split);
  auto b = pp::pipeline(wrapped, {tp::zeros({2, 4})}, split);
  REQUIRE(b.num_stages() == 2);
  for (int s = 0; s < 2; ++s) {
    std::ostringstream ops_a, ops_b;
    a.stage_module(s).print_ops(ops_a);
    b.stage_module(s).print_ops(ops_b);
    CHECK(ops_b.str() == ops_a.str());
  }
}
