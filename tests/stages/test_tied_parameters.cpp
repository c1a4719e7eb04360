// Tests for tied_parameters.h: summing the gradients of a parameter held by several stages.
#include "models.h"

using namespace stages_test;

TEST_CASE("sync_tied_gradients writes the summed gradient into every copy", "[tied]") {
  tp::manual_seed(50);
  ExampleCode model(4);
  tp::Tensor x = tp::randn({2, 4}), y = tp::randn({2, 4}), target = tp::randn({2, 4});
  auto pipe = pp::pipeline(model, {x, y});
  auto reference = reference_grads(model, {x, y}, {}, target);
  auto stages = pp::build_stages(pipe, {tp::cpu()});
  run_microbatch(pipe, stages, {x, y}, target);
  tp::Tensor p0 = stages[0]->module().find_tensor("mm_param1");
  tp::Tensor p1 = stages[1]->module().find_tensor("mm_param1");
  // Before syncing, each copy holds only its own stage's part.
  CHECK_FALSE(close(p0.grad().to_vector(), reference.at("mm_param1")));
  std::vector<float> part0 = p0.grad().to_vector(), part1 = p1.grad().to_vector();

  SECTION("all stages local") {
    pp::sync_tied_gradients(pp::stage_pointers(stages), pipe);
    CHECK(close(p0.grad().to_vector(), reference.at("mm_param1")));
    CHECK(p0.grad().to_vector() == p1.grad().to_vector());
    CHECK_FALSE(p0.grad().shares_storage(p1.grad()));
    // An SGD step keeps the copies equal.
    tp::optim::SGD opt({p0, p1}, {.lr = 0.1f});
    opt.step();
    CHECK(p0.to_vector() == p1.to_vector());
  }
  SECTION("a group split across processes") {
    std::vector<pp::PipelineStage*> only_first = {stages[0].get()};
    CHECK_THROWS_WITH(pp::sync_tied_gradients(only_first, pipe),
                      Catch::Contains("'mm_param1'") && Catch::Contains("stage(s) 1") &&
                          Catch::Contains("all-reduce"));
    pp::sync_tied_gradients(only_first, pipe, /*allow_partial=*/true);
    CHECK(p0.grad().to_vector() == part0);  // the local sum of one copy is itself
    CHECK(p1.grad().to_vector() == part1);
  }
}
