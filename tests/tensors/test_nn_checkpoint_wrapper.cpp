// Tests for nn/checkpoint_wrapper.h: a wrapped module keeps its names and gives the plain
// module's outputs and gradients bit for bit, with dropout drawing from its own generator.
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace nn = tensorplay::nn;

namespace {

constexpr int64_t kVocab = 12, kContext = 6;

nn::GPTConfig config() {
  return {.vocab_size = kVocab,
          .context_length = kContext,
          .n_layer = 3,
          .n_head = 2,
          .width = 16,
          .dropout = 0.2f};
}

/// Gives every Dropout of `model` its own generator (one per module, seeded by its position).
std::vector<std::unique_ptr<tp::Generator>> own_generators(nn::Module& model) {
  std::vector<std::unique_ptr<tp::Generator>> generators;
  for (auto& [path, module] : model.named_modules())
    if (auto* d = dynamic_cast<nn::DropoutImpl*>(module.get())) {
      generators.push_back(std::make_unique<tp::Generator>(100 + generators.size()));
      d->set_generator(generators.back().get());
    }
  return generators;
}

}  // namespace

TEST_CASE("checkpoint_wrapper keeps names and gives the plain gradients", "[checkpoint_wrapper]") {
  tp::manual_seed(3);
  nn::GPT plain(config()), wrapped(config());
  wrapped->load_state_dict(plain->state_dict());
  auto g_plain = own_generators(*plain);
  auto g_wrapped = own_generators(*wrapped);
  const auto names_before = wrapped->state_dict().size();
  for (const auto& block : *wrapped->blocks) CHECK(nn::checkpoint_wrapper(block) == block);
  CHECK(wrapped->blocks->at<nn::TransformerBlockImpl>(0)->is_checkpointed());
  CHECK(wrapped->state_dict().size() == names_before);
  CHECK(wrapped->named_parameters().size() == plain->named_parameters().size());

  tp::Generator data(8);
  for (int step = 0; step < 2; ++step) {  // two steps: the generators move on alike
    tp::Tensor idx = tp::randint(0, kVocab, {2, kContext}, {}, &data);
    tp::Tensor targets = tp::randint(0, kVocab, {2, kContext}, {}, &data);
    auto loss = [&](nn::GPT& m) {
      return tp::cross_entropy(m(idx).reshape({-1, kVocab}), targets.reshape({-1}));
    };
    tp::Tensor lp = loss(plain), lw = loss(wrapped);
    CHECK(lw.item() == lp.item());
    lp.backward();
    lw.backward();
    auto want = plain->named_parameters();
    auto got = wrapped->named_parameters();
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("step " << step << " parameter " << got[i].first);
      CHECK(got[i].first == want[i].first);
      CHECK(got[i].second.grad().to_vector() == want[i].second.grad().to_vector());
    }
    plain->zero_grad();
    wrapped->zero_grad();
  }
}

TEST_CASE("checkpoint_wrapper takes holders, and set_checkpointed(false) unwraps",
          "[checkpoint_wrapper]") {
  nn::Linear lin = nn::checkpoint_wrapper(nn::Linear(4, 3));
  CHECK(lin->is_checkpointed());
  tp::Tensor x = tp::randn({2, 4});
  tp::Tensor y = lin(x);
  CHECK(y.requires_grad());
  tp::sum(y).backward();
  CHECK(lin->weight.grad().defined());
  lin->set_checkpointed(false);
  CHECK_FALSE(lin->is_checkpointed());
}

TEST_CASE("a checkpointed module with keyword inputs", "[checkpoint_wrapper]") {
  struct Scale : nn::Module {
    Scale() { w = register_parameter("w", tp::full({3}, 2.0f)); }
    tp::Tensor forward_args(const std::vector<tp::Tensor>& args,
                            const nn::TensorDict& kwargs) override {
      return args[0] * w + kwargs.at("shift");
    }
    tp::Tensor w;
  };
  auto m = std::make_shared<Scale>();
  nn::checkpoint_wrapper(m);
  tp::Tensor x = tp::ones({3}).requires_grad_();
  tp::Tensor shift = tp::full({3}, 0.5f).requires_grad_();
  tp::Tensor y = (*m)({x}, {{"shift", shift}});
  CHECK(y.to_vector() == std::vector<float>{2.5f, 2.5f, 2.5f});
  tp::sum(y).backward();
  CHECK(x.grad().to_vector() == std::vector<float>{2, 2, 2});
  CHECK(shift.grad().to_vector() == std::vector<float>{1, 1, 1});
  CHECK(m->w.grad().to_vector() == std::vector<float>{1, 1, 1});
}
