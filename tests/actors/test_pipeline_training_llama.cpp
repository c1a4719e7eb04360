// The correctness contract for a Llama: traced and split by pipeline() at its blocks, built into
// stages and trained by a schedule on the stage actors, it gives the losses and gradients of the
// unsplit model with the same microbatch accumulation, step after step, in float32 and bfloat16;
// and so do the families of its shape (Qwen2, Qwen3, Mistral) and its scaled rotary positions.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "tensorplay/nn/llama.h"
#include "tensorplay/pipelining/build_stage.h"
#include "tensorplay/pipelining/pipeline.h"
#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace sc = tensorplay::schedules;

namespace {

constexpr int64_t kVocab = 16, kContext = 8;

// A tiny model of `family`: "llama", or "qwen2" (q, k, v biases), "qwen3" (q/k norms, a head
// size apart from the width, yarn rotary), "mistral" (a sliding window, a head size of its own),
// "llama3" and "dynamic" (Llamas with those rotary scalings, past their original window).
tp::nn::LlamaConfig tiny_llama(bool tied, const std::string& family = "llama") {
  tp::nn::LlamaConfig c{.vocab_size = kVocab,
                        .context_length = kContext,
                        .n_layer = 4,
                        .n_head = 4,
                        .n_kv_head = 2,
                        .width = 16,
                        .mlp_width = 24,
                        .tie_weights = tied};
  if (family == "qwen2") {
    c.model_type = family;
    c.qkv_bias = true;
  } else if (family == "qwen3") {
    c.model_type = family;
    c.qk_norm = true;
    c.head_dim = 6;
    c.rope_scaling = {.type = "yarn", .factor = 4.0, .original_context_length = 2};
  } else if (family == "mistral") {
    c.model_type = family;
    c.head_dim = 8;
    c.sliding_window = 5;  // shorter than the sequence: the band mask
  } else if (family == "llama3") {
    c.rope_scaling = {.type = "llama3", .factor = 4.0, .original_context_length = 4};
  } else if (family == "dynamic") {
    c.rope_scaling = {.type = "dynamic", .factor = 2.0, .original_context_length = 4};
  }
  return c;
}

tp::Tensor lm_loss(const tp::Tensor& logits, const tp::Tensor& targets) {
  return tp::cross_entropy(logits.reshape({-1, kVocab}), targets.reshape({-1}));
}

bool close(const std::vector<float>& a, const std::vector<float>& b, double rel) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    double tol = rel * std::max(1.0, std::fabs(static_cast<double>(b[i])));
    if (std::fabs(static_cast<double>(a[i]) - b[i]) > tol) return false;
  }
  return true;
}

// A split spec cutting before each of `starts` (block indices).
pp::PipelineOptions at_layers(std::vector<int> starts) {
  pp::PipelineOptions options;
  for (int i : starts)
    options.split_spec["layers." + std::to_string(i)] = pp::SplitPoint::Beginning;
  return options;
}

struct Case {
  sc::ScheduleKind kind;
  std::vector<int> cuts;  // 1 cut: 2 stages, 3 cuts: 4 stages
  bool tied;
  tp::DType dtype = tp::DType::Float32;
  double rel = 1e-5;
  std::string family = "llama";
};

// Trains the split model for 2 steps with SGD and compares with the unsplit twin.
void check_llama_schedule(const Case& c) {
  tp::manual_seed(17);
  tp::nn::Llama model(tiny_llama(c.tied, c.family)), twin(tiny_llama(c.tied, c.family));
  twin->load_state_dict(model->state_dict());
  model->to(c.dtype);
  twin->to(c.dtype);
  const int n = 4;
  const int64_t batch = 8;
  auto pipe = pp::pipeline(model, {tp::zeros({batch / n, kContext})}, at_layers(c.cuts));
  REQUIRE(pipe.num_stages() == static_cast<int>(c.cuts.size()) + 1);
  auto stages = pp::build_stages(pipe, {tp::cpu()});
  pp::PipelineSchedule schedule(stages, n, lm_loss, c.kind);
  tp::optim::SGD opt(pp::parameters(stages), {.lr = 0.1f});
  tp::optim::SGD twin_opt(twin->parameters(), {.lr = 0.1f});

  tp::Generator data(9);
  for (int step = 0; step < 2; ++step) {
    tp::Tensor idx = tp::randint(0, kVocab, {batch, kContext}, {}, &data);
    tp::Tensor targets = tp::randint(0, kVocab, {batch, kContext}, {}, &data);
    std::vector<tp::Tensor> losses;
    schedule.step({idx}, {.target = targets, .losses = &losses});
    const int64_t rows = batch / n;
    for (int mb = 0; mb < n; ++mb) {
      tp::Tensor loss = lm_loss(twin(idx.slice0(mb * rows, (mb + 1) * rows)),
                                targets.slice0(mb * rows, (mb + 1) * rows));
      INFO("step " << step << " microbatch " << mb);
      CHECK(losses.at(mb).item() == Approx(loss.item()).epsilon(c.rel));
      (loss * (1.0f / n)).backward();
    }
    for (const auto& s : stages)
      for (const auto& [name, p] : s->module().named_parameters()) {
        INFO("step " << step << " stage " << s->stage_index() << " parameter " << name);
        REQUIRE(p.grad().defined());
        CHECK(p.grad().dtype() == c.dtype);
        CHECK(close(p.grad().to_vector(), twin->find_tensor(name).grad().to_vector(), c.rel));
      }
    opt.step();
    opt.zero_grad();
    twin_opt.step();
    twin_opt.zero_grad();
  }
}

}  // namespace

TEST_CASE("a Llama split in 4 trains like the unsplit model under each schedule",
          "[pipeline][llama]") {
  for (auto kind : sc::all_schedule_kinds()) {
    DYNAMIC_SECTION(sc::schedule_name(kind)) {
      check_llama_schedule({.kind = kind, .cuts = {1, 2, 3}, .tied = true});
    }
  }
}

TEST_CASE("a Llama split in 2 with an untied head trains like the unsplit model",
          "[pipeline][llama]") {
  check_llama_schedule({.kind = sc::ScheduleKind::OneFOneB, .cuts = {2}, .tied = false});
}

TEST_CASE("a bfloat16 Llama trains split as unsplit", "[pipeline][llama]") {
  check_llama_schedule({.kind = sc::ScheduleKind::ZBVZeroBubble,
                        .cuts = {1, 2, 3},
                        .tied = true,
                        .dtype = tp::DType::BFloat16,
                        .rel = 2e-3});
}

TEST_CASE(
    "Qwen2, Qwen3, Mistral and Llamas with scaled rotary positions split in 3 train like "
    "the unsplit model",
    "[pipeline][llama]") {
  for (const char* family : {"qwen2", "qwen3", "mistral", "llama3", "dynamic"})
    for (auto kind : {sc::ScheduleKind::GPipe, sc::ScheduleKind::OneFOneB}) {
      DYNAMIC_SECTION(family << " " << sc::schedule_name(kind)) {
        check_llama_schedule({.kind = kind, .cuts = {1, 3}, .tied = false, .family = family});
      }
    }
}

TEST_CASE("a Qwen3 with yarn rotary split in 4 trains like the unsplit model under each schedule",
          "[pipeline][llama]") {
  for (auto kind : sc::all_schedule_kinds()) {
    DYNAMIC_SECTION(sc::schedule_name(kind)) {
      check_llama_schedule({.kind = kind, .cuts = {1, 2, 3}, .tied = true, .family = "qwen3"});
    }
  }
}
