// Tests for recompute.h: reading and printing policies, and the modules each one chooses.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "models.h"
#include "tensorplay/pipelining/recompute.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
using Paths = std::vector<std::string>;

namespace {
tp::nn::GPT small_gpt() {
  return tp::nn::GPT(tp::nn::GPTConfig{
      .vocab_size = 8, .context_length = 4, .n_layer = 4, .n_head = 2, .width = 8});
}
}  // namespace

TEST_CASE("recompute policies read and print", "[recompute]") {
  using Mode = pp::RecomputePolicy::Mode;
  CHECK(pp::RecomputePolicy::parse("none") == pp::RecomputePolicy::none());
  CHECK(pp::RecomputePolicy::parse("full").mode == Mode::Full);
  auto every = pp::RecomputePolicy::parse("every:3");
  CHECK(every.mode == Mode::EveryKth);
  CHECK(every.every == 3);
  auto types = pp::RecomputePolicy::parse("type:MLP,LayerNorm");
  CHECK(types.mode == Mode::ByType);
  CHECK(types.types == Paths{"MLP", "LayerNorm"});
  for (const char* text : {"none", "full", "every:1", "every:12", "type:MLP", "type:A,B"})
    CHECK(pp::RecomputePolicy::parse(text).to_string() == text);

  CHECK_THROWS_WITH(pp::RecomputePolicy::parse("every:0"), Catch::Contains("at least 1"));
  CHECK_THROWS_WITH(pp::RecomputePolicy::parse("every:x"), Catch::Contains("whole number"));
  CHECK_THROWS_WITH(pp::RecomputePolicy::parse("type:"), Catch::Contains("empty"));
  CHECK_THROWS_WITH(pp::RecomputePolicy::parse("selective"),
                    Catch::Contains("none, full, every:K"));
}

TEST_CASE("full and every-k-th choose blocks, by type chooses the outermost modules",
          "[recompute]") {
  auto gpt = small_gpt();
  CHECK(pp::recomputed_module_paths(*gpt, pp::RecomputePolicy::none()).empty());
  CHECK(pp::recomputed_module_paths(*gpt, pp::RecomputePolicy::full()) ==
        Paths{"blocks.0", "blocks.1", "blocks.2", "blocks.3"});
  CHECK(pp::recomputed_module_paths(*gpt, pp::RecomputePolicy::every_kth(1)) ==
        Paths{"blocks.0", "blocks.1", "blocks.2", "blocks.3"});
  CHECK(pp::recomputed_module_paths(*gpt, pp::RecomputePolicy::every_kth(2)) ==
        Paths{"blocks.1", "blocks.3"});
  CHECK(pp::recomputed_module_paths(*gpt, pp::RecomputePolicy::every_kth(5)).empty());
  CHECK(pp::recomputed_module_paths(*gpt, pp::RecomputePolicy::by_type({"MLP"})) ==
        Paths{"blocks.0.mlp", "blocks.1.mlp", "blocks.2.mlp", "blocks.3.mlp"});
  // LayerNorms inside a chosen block are part of it; ln_f stands alone.
  CHECK(pp::recomputed_module_paths(*gpt,
                                    pp::RecomputePolicy::by_type({"TransformerBlock", "LayerNorm"}))
            .back() == "ln_f");
  CHECK(pp::recomputed_module_paths(*gpt,
                                    pp::RecomputePolicy::by_type({"TransformerBlock", "LayerNorm"}))
            .size() == 5);

  // A Sequential's elements are blocks too; blocks inside blocks are not counted.
  auto stack_ptr = std::make_shared<stages_test::MlpStack>(4, 3);
  auto& stack = *stack_ptr;
  CHECK(pp::recomputed_module_paths(stack, pp::RecomputePolicy::full()) ==
        Paths{"layers.0", "layers.1", "layers.2"});
  CHECK(pp::recomputed_module_paths(stack, pp::RecomputePolicy::every_kth(2)) == Paths{"layers.1"});
}
