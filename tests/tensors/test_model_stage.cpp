// Tests for nn/model_stage.h: a GPT and a Llama cut into stages by hand compute the whole model's
// logits and gradients, under the model's names, and bad ranges are clear errors.
#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <vector>

#include "tensorplay/nn.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace nn = tensorplay::nn;

namespace {

nn::GPTConfig gpt_config() {
  return {.vocab_size = 16, .context_length = 8, .n_layer = 4, .n_head = 2, .width = 8};
}

nn::LlamaConfig llama_config() {
  return {.vocab_size = 16,
          .context_length = 8,
          .n_layer = 3,
          .n_head = 4,
          .n_kv_head = 2,
          .width = 16,
          .mlp_width = 32};
}

// Runs the stages one after the other and checks logits and gradients against the whole model.
template <typename Model>
void check_stages_match(const Model& model, const std::vector<nn::ModelStage>& stages) {
  tp::Generator gen(3);
  tp::Tensor idx = tp::randint(0, 16, {2, 8}, {}, &gen);
  tp::Tensor target = tp::randint(0, 16, {16}, {}, &gen);
  tp::Tensor whole = model(idx);
  tp::cross_entropy(whole.reshape({-1, 16}), target).backward();
  std::vector<std::pair<std::string, tp::Tensor>> expected;
  for (auto& [name, p] : model->named_parameters()) {
    expected.emplace_back(name, tp::clone(p.grad()));
    p.set_grad(tp::Tensor());
  }
  tp::Tensor h = idx;
  for (const auto& stage : stages) h = stage(h);
  CHECK(h.to_vector() == whole.to_vector());
  tp::cross_entropy(h.reshape({-1, 16}), target).backward();
  std::set<std::string> seen;
  for (const auto& stage : stages)
    for (auto& [name, p] : stage->named_parameters()) seen.insert(name);
  const auto params = model->named_parameters();
  REQUIRE(params.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO(expected[i].first);
    CHECK(seen.count(expected[i].first) == 1);
    REQUIRE(params[i].second.grad().defined());
    CHECK(params[i].second.grad().to_vector() == expected[i].second.to_vector());
  }
}

}  // namespace

TEST_CASE("a GPT cut into stages computes the whole model under its names", "[model_stage]") {
  tp::manual_seed(1);
  nn::GPT model(gpt_config());
  std::vector<nn::ModelStage> stages;
  for (auto [first, end] : nn::even_block_ranges(4, 3)) stages.emplace_back(model, first, end);
  CHECK(stages[0]->first_block() == 0);
  CHECK(stages[0]->end_block() == 2);
  CHECK(stages[0]->is_first());
  CHECK(stages[2]->is_last());
  std::vector<std::string> names;
  for (auto& [name, p] : stages[1]->named_parameters()) names.push_back(name);
  CHECK(names.front() == "blocks.2.ln_1.weight");
  // The tied head keeps the embedding's name on the last stage.
  std::set<std::string> last;
  for (auto& [name, p] : stages[2]->named_parameters()) last.insert(name);
  CHECK(last.count("wte.weight") == 1);
  CHECK(last.count("lm_head.weight") == 0);
  CHECK(stages[2]->find_tensor("wte.weight").is_same(model->wte->weight));
  check_stages_match(model, stages);
}

TEST_CASE("a Llama cut into stages computes the whole model under its names", "[model_stage]") {
  tp::manual_seed(1);
  nn::Llama model(llama_config());
  std::vector<nn::ModelStage> stages = {nn::ModelStage(model, 0, 1), nn::ModelStage(model, 1, 3)};
  std::vector<std::string> children;
  for (auto& [name, m] : stages[1]->named_children()) children.push_back(name);
  CHECK(children == std::vector<std::string>{"layers", "norm", "lm_head"});
  CHECK(stages[1]->named_parameters().front().first == "layers.1.input_layernorm.weight");
  check_stages_match(model, stages);
}

TEST_CASE("model stages refuse bad ranges", "[model_stage]") {
  nn::GPT model(gpt_config());
  CHECK_THROWS_WITH(nn::ModelStage(model, 2, 2),
                    Catch::Contains("blocks [2, 2) are not a non-empty range of the GPT's 4 "
                                    "blocks"));
  CHECK_THROWS_WITH(nn::ModelStage(model, 0, 5), Catch::Contains("give 0 <= first < end <= 4"));
  CHECK_THROWS_WITH(nn::even_block_ranges(2, 3),
                    Catch::Contains("3 stages for 2 blocks; give between 1 and 2 stages"));
  CHECK(nn::even_block_ranges(5, 2) == std::vector<std::pair<int64_t, int64_t>>{{0, 3}, {3, 5}});
}
