// Misuse of recomputation: a checkpointed function with nothing to recompute, one whose
// recomputation takes another branch or makes other shapes, and policies set at the wrong time or
// with wrong values.
#include <catch2/catch.hpp>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "misuse_support.h"
#include "tensorplay/pipelining/pipeline_stage.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
using misuse::expect_error;

TEST_CASE("misuse: a checkpointed function whose outputs need no gradient", "[misuse][recompute]") {
  expect_error<std::invalid_argument>(
      [] {
        tp::Tensor x = tp::ones({3});  // requires no grad, and the function has no parameters
        tp::checkpoint([](const tp::Tensor& a) { return a * 2.0f; }, x);
      },
      {"checkpoint", "none of which requires grad", "call the function directly"});
}

TEST_CASE("misuse: a checkpointed function that takes another branch when recomputed",
          "[misuse][recompute]") {
  expect_error<tp::RecomputationError>(
      [] {
        tp::Tensor w = tp::ones({3, 3}).requires_grad_();
        tp::Tensor x = tp::ones({2, 3});
        int calls = 0;
        tp::Tensor y = tp::checkpoint(
            [&](const tp::Tensor& in) {
              // A counter decides the branch: the forward takes the linear, the recomputation the
              // product.
              return ++calls == 1 ? tp::linear(in, w) : tp::matmul(in, w) * 1.0f;
            },
            x);
        tp::sum(y).backward();
      },
      {"differs from the forward at op 0", "Linear", "the same ops on the same shapes",
       "do not branch"});
}

TEST_CASE("misuse: a checkpointed function that runs more ops when recomputed",
          "[misuse][recompute]") {
  expect_error<tp::RecomputationError>(
      [] {
        tp::Tensor w = tp::ones({3}).requires_grad_();
        int calls = 0;
        tp::Tensor y = tp::checkpoint(
            [&](const tp::Tensor& in) {
              tp::Tensor h = in * w;
              return ++calls == 1 ? h : h * w;
            },
            tp::ones({3}));
        tp::sum(y).backward();
      },
      {"the forward ran 1 op(s)", "the recomputation 2", "another branch"});
}

TEST_CASE("misuse: a checkpointed function whose recomputation changes shapes",
          "[misuse][recompute]") {
  expect_error<tp::RecomputationError>(
      [] {
        tp::Tensor w = tp::ones({4}).requires_grad_();
        int64_t length = 3;
        tp::Tensor y =
            tp::checkpoint([&](const tp::Tensor& in) { return tp::narrow(in * w, 0, 0, length++); },
                           tp::ones({4}));
        tp::sum(y).backward();
      },
      {"differs from the forward at op 1", "[3]", "[4]", "the same ops on the same shapes"});
}

TEST_CASE("misuse: set_recompute on a stage that is running", "[misuse][recompute]") {
  expect_error<std::logic_error>(
      [] {
        auto block = tp::nn::Sequential(tp::nn::Linear(4, 4), tp::nn::ReLU()).ptr();
        pp::PipelineStage stage(block, 1, 3, tp::cpu(), {tp::zeros({2, 4})});
        stage.forward(0, {tp::zeros({2, 4})});  // microbatch 0 waits for its backward
        stage.set_recompute(pp::RecomputePolicy::full());
      },
      {"stage 1", "set_recompute while the stage is running", "1 microbatch(es)",
       "before the schedule's step or after it returns"});
}

TEST_CASE("misuse: recompute policies with wrong values", "[misuse][recompute]") {
  expect_error<std::invalid_argument>([] { pp::RecomputePolicy::parse("every:0"); },
                                      {"every:0", "at least 1"});
  expect_error<std::invalid_argument>([] { pp::RecomputePolicy::parse("selective"); },
                                      {"'selective'", "none, full, every:K", "type:Name"});
  expect_error<std::invalid_argument>([] { tp::nn::checkpoint_wrapper(nullptr); },
                                      {"checkpoint_wrapper", "null"});
}

TEST_CASE("misuse: a checkpointed function that draws more random numbers when recomputed",
          "[misuse][recompute]") {
  expect_error<tp::RecomputationError>(
      [] {
        tp::Tensor w = tp::ones({3}).requires_grad_();
        tp::Generator g(1);
        int calls = 0;
        tp::Tensor y = tp::checkpoint(
            [&](const tp::Tensor& in) {
              tp::Tensor noise = tp::randn({3}, {}, &g);
              if (++calls > 1) noise = tp::randn({3}, {}, &g);  // a second draw only now
              return in * w + noise;
            },
            tp::ones({3}));
        tp::sum(y).backward();
      },
      {"drew random numbers", "more often", "the same ops"});
}
