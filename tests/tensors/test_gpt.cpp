// Tests for nn/gpt.h: names and shapes, tied weights, GPT-2 initialisation, and a 2-layer GPT
// learning a synthetic next-token task.
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>

#include "cuda_test_support.h"
#include "gpt_task.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace nn = tensorplay::nn;

namespace {
nn::GPTConfig small_config(bool tie = true) {
  return {.vocab_size = 16,
          .context_length = 8,
          .n_layer = 2,
          .n_head = 2,
          .width = 8,
          .dropout = 0.0f,
          .tie_weights = tie};
}

double std_of(const tp::Tensor& t) {
  std::vector<float> v = t.to_vector();
  double s = 0, sq = 0;
  for (float x : v) s += x, sq += static_cast<double>(x) * x;
  double mean = s / v.size();
  return std::sqrt(sq / v.size() - mean * mean);
}
}  // namespace

TEST_CASE("GPT has nanoGPT's module names and logits of [B, T, vocab]", "[gpt]") {
  nn::GPT model(small_config());
  std::vector<std::string> children;
  for (auto& [n, m] : model->named_children()) children.push_back(n);
  CHECK(children == std::vector<std::string>{"wte", "wpe", "drop", "blocks", "ln_f", "lm_head"});
  std::vector<std::string> names;
  for (auto& [n, p] : model->named_parameters()) names.push_back(n);
  CHECK(names.front() == "wte.weight");
  CHECK(std::find(names.begin(), names.end(), "blocks.0.attn.c_attn.weight") != names.end());
  CHECK(std::find(names.begin(), names.end(), "blocks.1.mlp.c_proj.bias") != names.end());
  CHECK(names.back() == "ln_f.bias");
  CHECK(names.size() == 2 + 2 * 12 + 2);
  CHECK(model->find_module("blocks.1") != nullptr);
  CHECK(model->find_module("blocks.1")->type_name() == "TransformerBlock");

  tp::Tensor idx = tp::from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(model(idx).shape() == tp::Shape{2, 3, 16});
  CHECK_THROWS_WITH(model(tp::zeros({1, 9})), Catch::Contains("context_length 8"));
  CHECK_THROWS_WITH(model(tp::zeros({9})), Catch::Contains("[B, T]"));
  CHECK_THROWS_WITH(
      nn::GPT(nn::GPTConfig{
          .vocab_size = 16, .context_length = 8, .n_layer = 1, .n_head = 3, .width = 8}),
      Catch::Contains("divide"));
}

TEST_CASE("GPT ties lm_head to wte: listed once as a parameter, twice in state_dict", "[gpt]") {
  nn::GPT tied(small_config(true));
  CHECK(tied->lm_head->weight.is_same(tied->wte->weight));
  CHECK(tied->find_tensor("lm_head.weight").is_same(tied->wte->weight));
  tp::StateDict sd = tied->state_dict();
  CHECK(sd.contains("wte.weight"));
  CHECK(sd.contains("lm_head.weight"));
  CHECK_FALSE(sd.contains("pos"));  // non-persistent buffer
  CHECK(tied->named_buffers().size() == 1);
  int count = 0;
  for (auto& [n, p] : tied->named_parameters()) count += p.is_same(tied->wte->weight);
  CHECK(count == 1);
  // The shared weight receives the gradient of both uses.
  tp::Tensor idx = tp::from_vector({1, 2, 3}, {1, 3});
  tp::sum(tied(idx)).backward();
  CHECK(tied->wte->weight.grad().defined());

  nn::GPT untied(small_config(false));
  CHECK_FALSE(untied->lm_head->weight.is_same(untied->wte->weight));
  CHECK(untied->named_parameters().size() == tied->named_parameters().size() + 1);
}

TEST_CASE("GPT uses GPT-2's initialisation", "[gpt]") {
  tp::manual_seed(11);
  nn::GPT model(nn::GPTConfig{
      .vocab_size = 64, .context_length = 16, .n_layer = 8, .n_head = 4, .width = 64});
  CHECK(std_of(model->wte->weight) == Approx(0.02).epsilon(0.1));
  CHECK(std_of(model->blocks->at<nn::TransformerBlockImpl>(0)->attn->c_attn->weight) ==
        Approx(0.02).epsilon(0.1));
  double residual = 0.02 / std::sqrt(16.0);
  CHECK(std_of(model->blocks->at<nn::TransformerBlockImpl>(3)->mlp->c_proj->weight) ==
        Approx(residual).epsilon(0.1));
  CHECK(model->blocks->at<nn::TransformerBlockImpl>(0)->attn->c_attn->bias.to_vector() ==
        std::vector<float>(192, 0.0f));
  CHECK(model->ln_f->weight.to_vector() == std::vector<float>(64, 1.0f));
  // Same seed, same model.
  tp::manual_seed(11);
  nn::GPT again(nn::GPTConfig{
      .vocab_size = 64, .context_length = 16, .n_layer = 8, .n_head = 4, .width = 64});
  CHECK(again->wte->weight.to_vector() == model->wte->weight.to_vector());
}

TEST_CASE("a 2-layer GPT learns a repeating-pattern task in 200 AdamW steps", "[gpt]") {
  constexpr int64_t vocab = 16, context = 16, batch = 8;
  tp::manual_seed(1234);
  nn::GPT model(nn::GPTConfig{
      .vocab_size = vocab, .context_length = context, .n_layer = 2, .n_head = 2, .width = 64});
  tp::optim::AdamW opt(model->parameters(), {.lr = 3e-3f, .weight_decay = 0.0f});
  tp::Generator data(99);
  auto start = std::chrono::steady_clock::now();
  float first = 0, last = 0;
  for (int step = 0; step < 200; ++step) {
    auto [idx, targets] = gpt_task::batch(data, batch, context, vocab);
    tp::Tensor loss = gpt_task::loss(model, idx, targets);
    if (step == 0) first = loss.item();
    last = loss.item();
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO("first loss " << first << ", last loss " << last << ", " << seconds << " s");
  CHECK(first == Approx(std::log(16.0)).epsilon(0.1));  // chance: ln(vocab) = 2.77
  CHECK(last < 0.3f);
}

TEST_CASE("a 2-layer GPT in bfloat16 learns the task too", "[gpt]") {
  constexpr int64_t vocab = 16, context = 16, batch = 8;
  tp::manual_seed(1234);
  nn::GPT model(nn::GPTConfig{
      .vocab_size = vocab, .context_length = context, .n_layer = 2, .n_head = 2, .width = 64});
  model->to(tp::DType::BFloat16);
  tp::optim::AdamW opt(model->parameters(), {.lr = 3e-3f, .weight_decay = 0.0f});
  tp::Generator data(99);
  float first = 0, last = 0;
  for (int step = 0; step < 200; ++step) {
    auto [idx, targets] = gpt_task::batch(data, batch, context, vocab);
    tp::Tensor loss = gpt_task::loss(model, idx, targets);
    REQUIRE(loss.dtype() == tp::DType::BFloat16);
    if (step == 0) first = loss.item();
    last = loss.item();
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  for (const tp::Tensor& p : model->parameters()) {
    CHECK(p.dtype() == tp::DType::BFloat16);
    CHECK(p.grad().dtype() == tp::DType::BFloat16);
  }
  INFO("first loss " << first << ", last loss " << last);
  CHECK(first == Approx(std::log(16.0)).epsilon(0.1));
  CHECK(last < 0.3f);
}

TEST_CASE("a bfloat16 GPT holds little more than half the activation memory of float32", "[gpt]") {
  // Bytes held between forward and backward (what a pipeline stage stashes per microbatch).
  auto held_after_forward = [](tp::DType dtype) {
    tp::manual_seed(1);
    nn::GPT model(nn::GPTConfig{
        .vocab_size = 64, .context_length = 64, .n_layer = 2, .n_head = 4, .width = 128});
    model->to(dtype);
    tp::Generator data(3);
    auto [idx, targets] = gpt_task::batch(data, 8, 64, 64);
    size_t before = tp::host_memory_stats().allocated_bytes;
    tp::Tensor loss = gpt_task::loss(model, idx, targets);
    size_t held = tp::host_memory_stats().allocated_bytes - before;
    loss.backward();
    return static_cast<double>(held);
  };
  double f32 = held_after_forward(tp::DType::Float32);
  double bf16 = held_after_forward(tp::DType::BFloat16);
  INFO("float32 " << f32 / 1024 << " KiB, bfloat16 " << bf16 / 1024 << " KiB");
  // Products and the inputs of float32-computed ops are kept as bfloat16; attention
  // probabilities, softmax outputs and normalisation statistics stay float32.
  CHECK(bf16 < 0.6 * f32);
}

namespace {
// The same GPT on the CPU and on cuda:0 (same weights) in `dtype`, each with its own AdamW.
struct GptOnBothDevices {
  static constexpr nn::GPTConfig config{
      .vocab_size = 16, .context_length = 16, .n_layer = 2, .n_head = 2, .width = 32};
  const tp::Device gpu{"cuda:0"};
  nn::GPT on_cpu{nullptr}, on_gpu{nullptr};
  std::unique_ptr<tp::optim::AdamW> cpu_opt, gpu_opt;

  explicit GptOnBothDevices(tp::DType dtype) {
    tp::manual_seed(7);
    on_cpu = nn::GPT(config);
    on_gpu = nn::GPT(config);
    on_gpu->load_state_dict(on_cpu->state_dict());
    on_cpu->to(dtype);
    on_gpu->to(dtype);
    on_gpu->to(gpu);
    cpu_opt = std::make_unique<tp::optim::AdamW>(on_cpu->parameters(),
                                                 tp::optim::AdamWOptions{.lr = 3e-3f});
    gpu_opt = std::make_unique<tp::optim::AdamW>(on_gpu->parameters(),
                                                 tp::optim::AdamWOptions{.lr = 3e-3f});
  }
};
}  // namespace

TEST_CASE("cuda: a GPT trains on the GPU as on the CPU, and saves from it", "[gpt][cuda]") {
  if (cuda_test::skip_without_gpu()) return;
  GptOnBothDevices twins(tp::DType::Float32);
  const tp::Device gpu = twins.gpu;
  nn::GPT& on_cpu = twins.on_cpu;
  nn::GPT& on_gpu = twins.on_gpu;
  tp::optim::AdamW& cpu_opt = *twins.cpu_opt;
  tp::optim::AdamW& gpu_opt = *twins.gpu_opt;
  CHECK(on_gpu->lm_head->weight.is_same(on_gpu->wte->weight));
  CHECK(on_gpu->wte->weight.is_cuda());
  CHECK(on_gpu->pos.is_cuda());
  tp::Generator data(1);
  for (int step = 0; step < 5; ++step) {
    auto [idx, targets] = gpt_task::batch(data, 4, 16, 16);
    tp::Tensor cpu_loss = gpt_task::loss(on_cpu, idx, targets);
    tp::Tensor gpu_loss = gpt_task::loss(on_gpu, idx.to(gpu), targets.to(gpu));
    CHECK(gpu_loss.item() == Approx(cpu_loss.item()).epsilon(1e-3));
    for (auto* pair : {&cpu_opt, &gpu_opt}) pair->zero_grad();
    cpu_loss.backward();
    gpu_loss.backward();
    CHECK(tp::optim::clip_grad_norm(gpu_opt.parameters(), 1.0f) ==
          Approx(tp::optim::clip_grad_norm(cpu_opt.parameters(), 1.0f)).epsilon(1e-3));
    cpu_opt.step();
    gpu_opt.step();
  }
  // A checkpoint written from the GPU loads on the host.
  tp::StateDict from_gpu = on_gpu->state_dict();
  nn::GPT reloaded(GptOnBothDevices::config);
  reloaded->load_state_dict(from_gpu);
  std::vector<float> a = reloaded->wte->weight.to_vector(), b = on_cpu->wte->weight.to_vector();
  for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).margin(1e-4));
}

TEST_CASE("cuda: a bfloat16 GPT on the GPU follows the bfloat16 GPT on the CPU", "[gpt][cuda]") {
  if (cuda_test::skip_without_gpu()) return;
  GptOnBothDevices twins(tp::DType::BFloat16);
  const tp::Device gpu = twins.gpu;
  nn::GPT& on_cpu = twins.on_cpu;
  nn::GPT& on_gpu = twins.on_gpu;
  tp::optim::AdamW& cpu_opt = *twins.cpu_opt;
  tp::optim::AdamW& gpu_opt = *twins.gpu_opt;
  CHECK(on_gpu->wte->weight.dtype() == tp::DType::BFloat16);
  tp::Generator data(1);
  float first_gpu = 0, last_gpu = 0;
  // The loss falls clearly from about step 50: on the CPU, 2.77 to 1.91 by step 100.
  for (int step = 0; step < 100; ++step) {
    auto [idx, targets] = gpt_task::batch(data, 4, 16, 16);
    tp::Tensor cpu_loss = gpt_task::loss(on_cpu, idx, targets);
    tp::Tensor gpu_loss = gpt_task::loss(on_gpu, idx.to(gpu), targets.to(gpu));
    CHECK(gpu_loss.dtype() == tp::DType::BFloat16);
    if (step < 3) CHECK(gpu_loss.item() == Approx(cpu_loss.item()).epsilon(2e-2));
    if (step == 0) first_gpu = gpu_loss.item();
    last_gpu = gpu_loss.item();
    cpu_opt.zero_grad();
    gpu_opt.zero_grad();
    cpu_loss.backward();
    gpu_loss.backward();
    cpu_opt.step();
    gpu_opt.step();
  }
  INFO("bfloat16 on the GPU: first loss " << first_gpu << ", last " << last_gpu);
  CHECK(last_gpu < first_gpu - 0.3f);
}
