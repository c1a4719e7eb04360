// Tests for tensorplay/pipelining/planner/profile_run.h: profiling a small GPT cut at its blocks.
#include <catch2/catch.hpp>
#include <chrono>

#include "tensorplay/nn/gpt.h"
#include "tensorplay/pipelining/planner/profile_run.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;

namespace {

pp::ProfileOptions gpt_options(int64_t vocab) {
  pp::ProfileOptions o;
  o.candidates = {"blocks.0", "blocks.1"};
  o.model_name = "gpt-test";
  o.repeats = 1;
  o.loss_fn = [vocab](const tp::Tensor& logits, const tp::Tensor& targets) {
    return tp::cross_entropy(logits.reshape({-1, vocab}), targets.reshape({-1}));
  };
  o.target = tp::zeros({2, 8});
  o.ucx_channels = {};  // the in-process channel only, but where a test asks for UCX
  return o;
}

}  // namespace

TEST_CASE("profile measures every segment of a GPT between its blocks", "[planner][profile]") {
  tp::manual_seed(0);
  const int64_t vocab = 11, width = 16;
  tp::nn::GPT model(tp::nn::GPTConfig{
      .vocab_size = vocab, .context_length = 8, .n_layer = 2, .n_head = 2, .width = width});
  const pp::Profile p = pp::profile(*model.ptr(), {tp::zeros({2, 8})}, gpt_options(vocab));
  REQUIRE(p.segments.size() == 3);  // the embeddings, blocks.0, blocks.1 with the head
  CHECK(p.segment_names() == std::vector<std::string>{"", "blocks.0", "blocks.1"});
  CHECK(p.microbatch_size == 2);
  for (const pp::SegmentProfile& s : p.segments) {
    CHECK(s.forward > 0);
    CHECK(s.full_backward > 0);
    CHECK(s.input_backward > 0);
    CHECK(s.parameter_bytes > 0);
    CHECK(s.optimizer_bytes == 2 * s.gradient_bytes);
    CHECK(s.overhead >= 0);
    CHECK(s.overhead <= s.forward);
    CHECK(s.optimizer_seconds > 0);
  }
  // The embeddings hand [2, 8, 16] float32 on; the last segment hands nothing.
  CHECK(p.segments[0].output_bytes == 2 * 8 * width * 4);
  CHECK(p.segments[2].output_bytes == 0);
  // A block keeps its activations, and far fewer when it recomputes.
  CHECK(p.segments[1].activation_bytes > 0);
  CHECK(p.segments[1].activation_bytes_recompute < p.segments[1].activation_bytes);
  REQUIRE(p.channels.size() == 1);
  CHECK(p.channels[0].kind == "in_process");
  CHECK(p.channels[0].latency > 0);
  CHECK_NOTHROW(p.check());
}

TEST_CASE("profile measures the ucx channels after the in-process one and saves them",
          "[planner][profile][ucx]") {
  using namespace std::chrono_literals;
  tp::manual_seed(0);
  tp::nn::GPT model(tp::nn::GPTConfig{
      .vocab_size = 5, .context_length = 4, .n_layer = 1, .n_head = 1, .width = 4});
  pp::ProfileOptions o = gpt_options(5);
  o.candidates = {"blocks.0"};
  o.target = tp::zeros({1, 4});
  o.ucx_channels = {{.kind = "ucx_bogus", .transports = "no_such_transport"},
                    {.kind = "ucx_tcp", .transports = "tcp", .same_host = false}};
  o.ping_pong = {.large_bytes = 1u << 20, .rounds = 3, .pause = 100us};
  const pp::Profile p = pp::profile(*model.ptr(), {tp::zeros({1, 4})}, o);
  REQUIRE(p.channels.size() == 2);  // the bogus one left out, not an error
  CHECK(p.channels[0].kind == "in_process");
  CHECK(p.channels[1].kind == "ucx_tcp");
  CHECK(p.channels[1].latency > 0);
  CHECK(p.channels[1].bandwidth > 0);
  const pp::Profile back = pp::profile_from_json(pp::profile_to_json(p));
  REQUIRE(back.channels.size() == 2);
  CHECK(back.channel("ucx_tcp").latency == p.channels[1].latency);
  CHECK(back.channel("ucx_tcp").bandwidth == p.channels[1].bandwidth);
}

TEST_CASE("profile times every segment at larger microbatches too", "[planner][profile]") {
  tp::manual_seed(0);
  const int64_t vocab = 11;
  tp::nn::GPT model(tp::nn::GPTConfig{
      .vocab_size = vocab, .context_length = 8, .n_layer = 2, .n_head = 2, .width = 16});
  pp::ProfileOptions o = gpt_options(vocab);
  o.larger_microbatches = {2, 4};
  const std::vector<float> before = model->parameters().front().to_vector();
  const pp::Profile p = pp::profile(*model.ptr(), {tp::zeros({2, 8})}, o);
  REQUIRE(p.segments.size() == 3);
  for (const pp::SegmentProfile& s : p.segments) {
    REQUIRE(s.larger.size() == 2);
    CHECK(s.larger[0].samples == 4);  // twice the example's 2 samples
    CHECK(s.larger[1].samples == 8);
    for (const pp::SizedTimes& t : s.larger) {
      CHECK(t.forward > 0);
      CHECK(t.full_backward > 0);
      CHECK(t.input_backward > 0);
    }
  }
  CHECK_NOTHROW(p.check());
  CHECK(pp::profile_from_json(pp::profile_to_json(p)).segments[1].larger[1].forward ==
        p.segments[1].larger[1].forward);
  CHECK(model->parameters().front().to_vector() == before);  // timing does not train
  for (const tp::Tensor& param : model->parameters())
    if (param.grad().defined())
      for (float g : param.grad().to_vector()) REQUIRE(g == 0.0f);
  o.larger_microbatches = {2, 2};
  CHECK_THROWS_WITH(pp::profile(*model.ptr(), {tp::zeros({2, 8})}, o),
                    Catch::Contains("larger_microbatches must ascend"));
}

TEST_CASE("profile refuses what it cannot measure", "[planner][profile]") {
  tp::nn::GPT model(tp::nn::GPTConfig{
      .vocab_size = 5, .context_length = 4, .n_layer = 1, .n_head = 1, .width = 4});
  pp::ProfileOptions o = gpt_options(5);
  o.candidates.clear();
  CHECK_THROWS_WITH(pp::profile(*model.ptr(), {tp::zeros({1, 4})}, o),
                    Catch::Contains("no split candidates"));
  o = gpt_options(5);
  o.target = tp::Tensor();
  CHECK_THROWS_WITH(pp::profile(*model.ptr(), {tp::zeros({1, 4})}, o), Catch::Contains("target"));
}
