// Tests for tensor_parallel/clip_grad_norm.h: a GPT split over 2 ranks (threads, join_job) gets
// the unsplit model's gradient norm, and its clipped gradients are the unsplit ones' shares.
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "in_process_job.h"
#include "tensorplay/distributed/tensor_parallel/clip_grad_norm.h"
#include "tensorplay/distributed/tensor_parallel/detail/shard.h"
#include "tensorplay/distributed/tensor_parallel/model_plans.h"
#include "tensorplay/nn.h"
#include "tensorplay/optim.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace tpar = tensorplay::distributed::tensor_parallel;

namespace {

constexpr int64_t kVocab = 16, kTime = 8;

tp::nn::GPTConfig config() {
  return {.vocab_size = kVocab, .context_length = kTime, .n_layer = 2, .n_head = 4, .width = 32};
}

void backward(tp::nn::GPT& model) {
  tp::manual_seed(5);
  const tp::Tensor ids = tp::randint(0, kVocab, {2, kTime + 1});
  const tp::Tensor in = tp::narrow(ids, 1, 0, kTime), target = tp::narrow(ids, 1, 1, kTime);
  tp::cross_entropy(model(in).reshape({-1, kVocab}), target.reshape({-1})).backward();
}

}  // namespace

TEST_CASE("clip_grad_norm over a split GPT clips as over the unsplit one", "[tensor_parallel]") {
  const float max_norm = 0.05f;
  tp::manual_seed(9);
  tp::nn::GPT reference(config());
  backward(reference);
  const float norm = tp::optim::clip_grad_norm(reference->parameters(), max_norm);
  REQUIRE(norm > max_norm);  // so the clipping is exercised
  std::map<std::string, tp::Tensor> clipped;
  for (auto& [name, p] : reference->named_parameters()) clipped[name] = tp::clone(p.grad());

  std::vector<tp::nn::GPT> models;
  for (int r = 0; r < 2; ++r) {
    tp::manual_seed(9);
    models.emplace_back(config());
  }
  std::vector<float> norms(2), worst(2);
  auto outcomes = tp::testing::run_ranks(2, {0, 1}, std::chrono::seconds(60), [&](auto& w) {
    auto& model = models[w.rank()];
    tpar::parallelize_module(*model, w, tpar::gpt_tp_plan(config(), 2, {.vocab_parallel = true}));
    backward(model);
    norms[w.rank()] = tpar::clip_grad_norm(model->parameters(), max_norm, w);
    for (auto& [name, p] : model->named_parameters()) {
      tp::Tensor expected = tp::clone(clipped.at(name));
      if (const auto spec = tpar::detail::shard_spec_of(p))
        tpar::detail::shard_in_place(expected, spec->dim, w.rank(), 2, spec->packed);
      const auto a = expected.to_vector(), b = p.grad().to_vector();
      for (size_t i = 0; i < a.size(); ++i)
        worst[w.rank()] = std::max(worst[w.rank()], std::abs(a[i] - b[i]));
    }
  });
  for (int r = 0; r < 2; ++r) {
    REQUIRE(outcomes[r].error == "");
    CHECK(norms[r] == Approx(norm).epsilon(1e-5));
    CHECK(worst[r] < 1e-6f);
  }
}
