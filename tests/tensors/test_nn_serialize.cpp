// Tests for nn/serialize.h: a module saved to a file loads into a fresh one; errors name keys.
#include <catch2/catch.hpp>
#include <filesystem>

#include "temp_path.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace nn = tensorplay::nn;

namespace {
using test_files::temp_path;
nn::GPTConfig config() {
  return {.vocab_size = 12, .context_length = 6, .n_layer = 2, .n_head = 2, .width = 8};
}
}  // namespace

TEST_CASE("a saved GPT loads into a fresh one and computes the same logits", "[nn_serialize]") {
  tp::manual_seed(1);
  nn::GPT a(config());
  tp::manual_seed(2);
  nn::GPT b(config());
  tp::Tensor idx = tp::from_vector({1, 5, 7, 11}, {1, 4});
  REQUIRE(a(idx).to_vector() != b(idx).to_vector());
  std::string path = temp_path("tp_test_gpt.bin");
  nn::save(a, path);
  auto result = nn::load(b, path);
  std::filesystem::remove(path);
  CHECK(result.missing_keys.empty());
  CHECK(b(idx).to_vector() == a(idx).to_vector());
  CHECK(b->lm_head->weight.is_same(b->wte->weight));  // still tied after loading
}

TEST_CASE("loading a checkpoint of another model names the offending keys", "[nn_serialize]") {
  nn::GPT small(config());
  nn::GPTConfig deeper_config = config();
  deeper_config.n_layer = 3;
  nn::GPT deeper(deeper_config);
  nn::GPTConfig wider_config = config();
  wider_config.vocab_size = 13;
  nn::GPT wider(wider_config);
  std::string path = temp_path("tp_test_gpt_small.bin");
  nn::save(small, path);
  CHECK_THROWS_WITH(nn::load(deeper, path),
                    Catch::Contains("missing keys") && Catch::Contains("'blocks.2.ln_1.weight'"));
  CHECK_THROWS_WITH(nn::load(wider, path),
                    Catch::Contains("shape mismatch") && Catch::Contains("'wte.weight'"));
  auto relaxed = nn::load(deeper, path, /*strict=*/false);
  CHECK(relaxed.missing_keys.size() == 12);
  CHECK(deeper->blocks->at<nn::TransformerBlockImpl>(0)->ln_1->weight.to_vector() ==
        small->blocks->at<nn::TransformerBlockImpl>(0)->ln_1->weight.to_vector());
  std::filesystem::remove(path);
  CHECK_THROWS_WITH(nn::load(small, path), Catch::Contains("cannot open"));
}
