// A Llama (grouped-query attention, rotary positions, SwiGLU) cut by pipeline() at its blocks:
// the stages hold the blocks they should, tied embedding and head form one group, and the stages
// together reproduce the model's outputs and gradients.
#include "models.h"
#include "tensorplay/nn/llama.h"

using namespace stages_test;

namespace {

tp::nn::LlamaConfig small_llama(bool tied) {
  return {.vocab_size = 13,
          .context_length = 8,
          .n_layer = 4,
          .n_head = 4,
          .n_kv_head = 2,
          .width = 16,
          .mlp_width = 24,
          .tie_weights = tied};
}

tp::Tensor token_ids(int64_t b, int64_t t, int64_t vocab) {
  std::vector<float> ids;
  for (int64_t i = 0; i < b * t; ++i) ids.push_back(static_cast<float>((i * 5 + 2) % vocab));
  return tp::from_vector(ids, {b, t});
}

}  // namespace

TEST_CASE("a Llama cut into 4 stages at its blocks matches the model", "[transformer][llama]") {
  for (bool tied : {false, true}) {
    DYNAMIC_SECTION((tied ? "tied" : "untied") << " head") {
      tp::manual_seed(91);
      tp::nn::Llama model(small_llama(tied));
      const int64_t batch = 2, time = 8;
      tp::Tensor idx = token_ids(batch, time, 13), target = tp::randn({batch, time, 13});
      auto pipe = pp::pipeline(model, {idx},
                               {.split_spec = {{"layers.1", pp::SplitPoint::Beginning},
                                               {"layers.2", pp::SplitPoint::Beginning},
                                               {"layers.3", pp::SplitPoint::Beginning}}});
      REQUIRE(pipe.num_stages() == 4);
      for (int s = 0; s < 3; ++s)
        CHECK(pipe.boundary(s) ==
              std::vector<pp::TensorMeta>{{{batch, time, 16}, tp::DType::Float32}});
      if (tied)
        CHECK(pipe.tied_parameters() ==
              std::map<std::string, std::vector<int>>{{"embed_tokens.weight", {0, 3}}});
      else
        CHECK(pipe.tied_parameters().empty());
      CHECK(pipe.stage_module(0).find_module("layers.0.self_attn.rotary_emb"));
      CHECK_FALSE(pipe.stage_module(0).find_module("layers.1"));
      CHECK(pipe.stage_module(3).find_module("norm"));
      CHECK(pipe.stage_module(3).find_module("lm_head"));

      tp::Tensor ref = model(idx);
      CHECK(pipe.forward({idx})[0].to_vector() == ref.to_vector());
      auto reference = reference_grads(*model, {idx}, {}, target);
      check_grads(stage_grads(pipe, {idx}, {}, target), reference);

      // Stages built from the trace run a smaller microbatch too.
      auto stages = pp::build_stages(pipe, {tp::cpu()});
      tp::Tensor small = token_ids(1, time, 13);
      std::vector<tp::Tensor> values = {small};
      for (auto& s : stages) values = s->forward(0, values);
      CHECK(values.at(0).to_vector() == model(small).to_vector());
      for (auto& s : stages) s->clear();
    }
  }
}
