// Tests for optim/serialize.h: saving model and optimizer mid-training, loading them into fresh
// objects and continuing gives the same losses, bit for bit, as never stopping.
#include <catch2/catch.hpp>
#include <filesystem>

#include "gpt_task.h"
#include "temp_path.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace nn = tensorplay::nn;
namespace optim = tensorplay::optim;

namespace {
nn::GPTConfig config() {
  return {.vocab_size = 16, .context_length = 8, .n_layer = 2, .n_head = 2, .width = 16};
}

using Batches = std::vector<std::pair<tp::Tensor, tp::Tensor>>;

std::vector<float> train(nn::GPT& model, optim::Optimizer& opt, const Batches& batches,
                         size_t begin, size_t end) {
  std::vector<float> losses;
  for (size_t i = begin; i < end; ++i) {
    tp::Tensor loss = gpt_task::loss(model, batches[i].first, batches[i].second);
    losses.push_back(loss.item());
    opt.zero_grad();
    loss.backward();
    optim::clip_grad_norm(opt.parameters(), 1.0f);
    opt.step();
  }
  return losses;
}

template <typename MakeOptimizer>
void check_resume(MakeOptimizer make_optimizer) {
  tp::Generator data(5);
  Batches batches;
  for (int i = 0; i < 20; ++i) batches.push_back(gpt_task::batch(data, 4, 8, 16));
  std::string model_path = test_files::temp_path("resume_model.bin");
  std::string opt_path = test_files::temp_path("resume_optim.bin");

  tp::manual_seed(3);
  nn::GPT model(config());
  auto opt = make_optimizer(model->parameters());
  train(model, *opt, batches, 0, 10);
  nn::save(model, model_path);
  optim::save(*opt, opt_path);
  std::vector<float> uninterrupted = train(model, *opt, batches, 10, 20);

  tp::manual_seed(4);  // different initial weights: everything must come from the files
  nn::GPT resumed(config());
  auto resumed_opt = make_optimizer(resumed->parameters());
  nn::load(resumed, model_path);
  optim::load(*resumed_opt, opt_path);
  std::vector<float> continued = train(resumed, *resumed_opt, batches, 10, 20);
  std::filesystem::remove(model_path);
  std::filesystem::remove(opt_path);

  CHECK(continued == uninterrupted);
  CHECK(uninterrupted.back() < uninterrupted.front());
}
}  // namespace

TEST_CASE("save, load and continue with AdamW gives the same losses", "[optim_serialize]") {
  check_resume([](std::vector<tp::Tensor> params) {
    return std::make_unique<optim::AdamW>(std::move(params), optim::AdamWOptions{.lr = 3e-3f});
  });
}

TEST_CASE("save, load and continue with SGD momentum gives the same losses", "[optim_serialize]") {
  check_resume([](std::vector<tp::Tensor> params) {
    return std::make_unique<optim::SGD>(std::move(params),
                                        optim::SGDOptions{.lr = 0.1f, .momentum = 0.9f});
  });
}

TEST_CASE("an optimizer checkpoint is refused by a mismatched optimizer", "[optim_serialize]") {
  tp::Tensor w = tp::ones({3}).requires_grad_();
  optim::AdamW adam({w});
  w.set_grad(tp::ones({3}));
  adam.step();
  std::string path = test_files::temp_path("adam_state.bin");
  optim::save(adam, path);
  optim::SGD sgd({w}, {.lr = 0.1f, .momentum = 0.9f});
  CHECK_THROWS_WITH(optim::load(sgd, path), Catch::Contains("unexpected key"));
  tp::Tensor other = tp::ones({4}).requires_grad_();
  optim::AdamW wrong_shape({other});
  CHECK_THROWS_WITH(optim::load(wrong_shape, path), Catch::Contains("[3]"));
  std::filesystem::remove(path);
}
